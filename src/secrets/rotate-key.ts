// `secrets-server rotate-key`: moves every encrypted record to the current master key
// version. Each batch is one transaction, so an interruption (Ctrl-C, a crash, a power
// cut) leaves every record either old and readable with the previous key, or new; running
// the command again continues where it stopped. The server may keep running meanwhile.
// The audit chain is verified and re-keyed first, in one transaction of its own.

import { createAuditRepo } from "../audit/audit.repo.ts";
import { describeBreak, keyVersionList, rekeyAuditChain } from "../audit/audit.verify.ts";
import { loadConfig } from "../core/config.ts";
import { type Keyring, loadKeyring } from "../core/crypto.ts";
import { createEncryptedRecordCounter, ENCRYPTED_COLUMNS, type EncryptedColumn } from "../core/encrypted-columns.ts";
import { type PgStore, pgRows, pgRun } from "../core/postgres.ts";
import { checkMasterKeys, closeStore, isPostgres, openStore, requireDatabaseFile, type Store, writeTransaction } from "../core/store.ts";
import { plural } from "../core/text.ts";
import { createVault, DecryptError, integrationAad, secretValueAad, type Vault } from "../core/vault.ts";

const DEFAULT_BATCH_SIZE = 200;

interface Output {
  out: (line: string) => void;
  err: (line: string) => void;
}

interface RotationResult {
  reencrypted: number;
  failed: number;
  projectKeysRemoved: number;
  /** Audit events whose chain link was rewritten under the current version. */
  auditEventsRekeyed: number;
  /** Set when the audit chain did not verify: then nothing at all was changed. */
  auditBreak?: string;
  interrupted: boolean;
}

/** Re-encrypts in batches; `shouldStop` is asked between batches. Exported for the tests of both stores. */
export async function rotateRecords(
  db: Store,
  keyring: Keyring,
  options: { batchSize: number; keyHashOnly?: boolean; shouldStop: () => boolean; output: Output },
): Promise<RotationResult> {
  const vault = createVault(db, keyring);
  const current = keyring.currentVersion;
  const { out, err } = options.output;
  const result: RotationResult = { reencrypted: 0, failed: 0, projectKeysRemoved: 0, auditEventsRekeyed: 0, interrupted: false };

  const pending = await createEncryptedRecordCounter(db).pendingByColumn(current);
  const pendingIn = (group: string) =>
    pending.filter(({ column }) => resealPlan(column, vault)?.group === group).reduce((sum, { pending: n }) => sum + n, 0);
  const pendingValues = pendingIn("secret values");
  const pendingIntegrations = pendingIn("integration credentials");
  out(
    `Master key version ${current} is current. To re-encrypt: ${pendingValues} secret values, ${pendingIntegrations} integration credentials.`,
  );

  // The audit chain first: if it does not verify, stop before anything changes, so the old
  // key stays needed and the break stays visible to audit verify.
  const audit = await createAuditRepo(db).countNotKeyedWith(current);
  const toRekey = options.keyHashOnly === true ? audit.other : audit.other - audit.hashOnly;
  out(
    `Audit log: ${toRekey} of ${audit.total} events to re-key with version ${current}` +
      (audit.isCheckpointStale ? ", and its retention checkpoint to re-sign." : ".") +
      (audit.hashOnly > 0 && !options.keyHashOnly
        ? ` ${plural(audit.hashOnly, "event")} checked by hash only stay as they are: audit verify says how to key them.`
        : ""),
  );
  if (toRekey > 0 || audit.isCheckpointStale) {
    if (options.shouldStop()) return { ...result, interrupted: true };
    const rekeyed = await rekeyAuditChain(db, keyring, { keyHashOnly: options.keyHashOnly === true });
    if (!rekeyed.ok) return { ...result, auditBreak: describeBreak(rekeyed) };
    result.auditEventsRekeyed = rekeyed.rekeyed;
    const hashOnly = rekeyed.wereHashOnly > 0 ? ` (${rekeyed.wereHashOnly} of them were checked by hash only before)` : "";
    out(
      `Audit log verified; ${rekeyed.rekeyed} events re-keyed with ${keyVersionList([current])}${hashOnly}. ` +
        `The head hash was ${rekeyed.previousHeadHash} and is now ${rekeyed.headHash}: record the new one.`,
    );
  }

  // Every record sealed with a project data key, in the table's order (see resealStatements)
  // so a row that fails to open is passed over instead of retried forever.
  const doneIn = new Map<string, number>();
  for (const { column, pending: pendingHere } of pending) {
    const plan = resealPlan(column, vault);
    if (!plan || pendingHere === 0) continue;
    const statements = resealStatements(db, column, plan);
    const also = plan.alsoSet;
    let after: unknown[] | undefined;
    for (;;) {
      if (options.shouldStop()) return { ...result, interrupted: true };
      const batch = await writeTransaction(db, async () => {
        const rows = await statements.page(current, after, options.batchSize);
        for (const row of rows) {
          const moved = await reseal(vault, row.projectId, plan.aad(row), row);
          if (moved) {
            await statements.update(row, moved, also ? await also.value(row.projectId, moved) : undefined);
            result.reencrypted++;
          } else {
            result.failed++;
            err(`${plan.describe(row)} does not decrypt with key version ${row.keyVersion}; left as it is.`);
          }
        }
        return rows;
      });
      if (batch.length === 0) break;
      after = batch.at(-1)!.position;
      const done = (doneIn.get(plan.group) ?? 0) + batch.length;
      doneIn.set(plan.group, done);
      out(`${plan.group}: ${done}/${pendingIn(plan.group)}`);
      // Lets a pending SIGINT be seen between batches, never inside one.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  // Project data keys: every project gets one under the current key; an old one goes only
  // when no record of its project still needs it.
  if (options.shouldStop()) return { ...result, interrupted: true };
  await writeTransaction(db, async () => {
    const withOldKeys = "SELECT DISTINCT project_id FROM project_keys WHERE key_version <> ";
    const projects = isPostgres(db)
      ? (await pgRows<{ project_id: string }>(db, `${withOldKeys}$1`, [current])).map((r) => r.project_id)
      : (db.$client.prepare(`${withOldKeys}?`).pluck().all(current) as string[]);
    for (const projectId of projects) await vault.createProjectKey(projectId);
    // Still needed while any record of its project is sealed with it.
    const stillNeeded = ENCRYPTED_COLUMNS.filter((c) => c.sealedWith === "project data key").map(
      (c) =>
        `AND NOT EXISTS (SELECT 1 FROM ${c.table} r WHERE r.${c.projectId} = project_keys.project_id ` +
        `AND r.${c.keyVersion} = project_keys.key_version${c.isNullable ? ` AND r.${c.ciphertext} IS NOT NULL` : ""})`,
    );
    const deleteOld = (placeholder: string) => `DELETE FROM project_keys WHERE key_version <> ${placeholder} ${stillNeeded.join(" ")}`;
    result.projectKeysRemoved = isPostgres(db)
      ? await pgRun(db, deleteOld("$1"), [current])
      : db.$client.prepare(deleteOld("?")).run(current).changes;
  });
  return result;
}

interface ResealRow {
  /** Where the row stands in the walk's order (resealStatements). */
  position: unknown[];
  projectId: string;
  ciphertext: Buffer;
  keyVersion: number;
  /** Secret values only: what their AAD binds them to besides the project. */
  secretId?: string;
  versionNumber?: number;
  environment?: string;
}

/**
 * How rotate-key re-encrypts one kind of record in place: the batch query, the record's AAD
 * and how an error names it. None for project data keys, which are replaced, not resealed.
 */
interface ResealPlan {
  group: string;
  /** The batch query's parts: its columns (besides the position), tables, and conditions. */
  columns: string;
  from: string;
  /** The alias (with its dot) of the table that holds the ciphertext, or "". */
  alias: string;
  where: string[];
  aad(row: ResealRow): string;
  describe(row: ResealRow): string;
  /** A column of the same row that depends on the key version and is rewritten with it. */
  alsoSet?: { column: string; value(projectId: string, moved: Resealed): Promise<string> };
}

function resealPlan(column: EncryptedColumn, vault: Vault): ResealPlan | undefined {
  const { table, ciphertext, keyVersion, projectId } = column;
  const aad = column.aad;
  switch (aad.kind) {
    case "project data key":
      return undefined;
    case "secret value":
      return {
        group: "secret values",
        columns: `v.secret_id AS "secretId", v.version_number AS "versionNumber", v.${projectId} AS "projectId",
                  s.environment AS environment, v.${ciphertext} AS ciphertext, v.${keyVersion} AS "keyVersion"`,
        from: `${table} v JOIN secrets s ON s.id = v.secret_id`,
        alias: "v.",
        where: [],
        aad: (row) => secretValueAad(row.projectId, row.environment!, row.secretId!, row.versionNumber!),
        describe: (row) => `Secret ${row.secretId} version ${row.versionNumber}`,
        // The digest is keyed per key version too: recomputed under the new one.
        alsoSet: { column: "digest", value: (projectId, moved) => vault.digest(projectId, moved.keyVersion, moved.plaintext) },
      };
    case "integration":
      return {
        group: "integration credentials",
        columns: `${projectId} AS "projectId", ${ciphertext} AS ciphertext, ${keyVersion} AS "keyVersion"`,
        from: table,
        alias: "",
        where: [`${ciphertext} IS NOT NULL`],
        aad: (row) => integrationAad(row.projectId, aad.field),
        describe: (row) => `The ${column.name} of project ${row.projectId}`,
      };
  }
}

async function reseal(vault: Vault, projectId: string, aad: string, sealed: { ciphertext: Buffer; keyVersion: number }) {
  let plaintext: string;
  try {
    plaintext = await vault.open(projectId, aad, sealed);
  } catch (error) {
    if (error instanceof DecryptError) return undefined;
    throw error;
  }
  return { ...(await vault.seal(projectId, aad, plaintext)), plaintext };
}

type Resealed = NonNullable<Awaited<ReturnType<typeof reseal>>>;

/**
 * Columns that order a table's rows for the walk: SQLite's rowid, or on PostgreSQL, which
 * has no rowid, the primary key.
 */
const PG_ORDER: Record<string, string[]> = {
  secret_versions: ["secret_id", "version_number"],
  integrations: ["project_id"],
};

/** One kind of record's batch query and update, on either store; call both inside a write transaction. */
function resealStatements(db: Store, column: EncryptedColumn, plan: ResealPlan) {
  const pg = isPostgres(db);
  const order = pg ? PG_ORDER[column.table] : ["rowid"];
  if (!order) throw new Error(`rotate-key does not know the primary key of ${column.table}`);
  const placeholders = (from: number, count: number) => Array.from({ length: count }, (_, i) => (pg ? `$${from + i}` : "?"));
  const ordered = order.map((c) => `${plan.alias}${c}`);
  const select = (isFirst: boolean) => {
    const where = [...plan.where, `${plan.alias}${column.keyVersion} <> ${placeholders(1, 1)[0]}`];
    if (!isFirst) where.push(`(${ordered.join(", ")}) > (${placeholders(2, order.length).join(", ")})`);
    return (
      `SELECT ${ordered.map((c, i) => `${c} AS p${i}`).join(", ")}, ${plan.columns} FROM ${plan.from} ` +
      `WHERE ${where.join(" AND ")} ORDER BY ${ordered.join(", ")} LIMIT ${placeholders(isFirst ? 2 : order.length + 2, 1)[0]}`
    );
  };
  const selectFirst = select(true);
  const selectNext = select(false);
  const set = [column.ciphertext, column.keyVersion, ...(plan.alsoSet ? [plan.alsoSet.column] : [])];
  const values = placeholders(1, set.length + order.length + 1);
  const update =
    `UPDATE ${column.table} SET ${set.map((c, i) => `${c} = ${values[i]}`).join(", ")} ` +
    `WHERE ${order.map((c, i) => `${c} = ${values[set.length + i]}`).join(" AND ")} AND ${column.keyVersion} = ${values.at(-1)}`;
  const sqlite = isPostgres(db)
    ? undefined
    : { first: db.$client.prepare(selectFirst), next: db.$client.prepare(selectNext), update: db.$client.prepare(update) };

  return {
    /** The next rows not on `current`, after `after` (a row's position) or from the start. */
    async page(current: number, after: unknown[] | undefined, limit: number): Promise<ResealRow[]> {
      const values = after === undefined ? [current, limit] : [current, ...after, limit];
      const rows = sqlite
        ? ((after === undefined ? sqlite.first : sqlite.next).all(...values) as Record<string, unknown>[])
        : await pgRows<Record<string, unknown>>(db as PgStore, after === undefined ? selectFirst : selectNext, values);
      return rows.map((row) => ({ ...(row as unknown as ResealRow), position: order.map((_, i) => row[`p${i}`]) }));
    },

    async update(row: ResealRow, moved: Resealed, alsoValue: string | undefined): Promise<void> {
      const values = [moved.ciphertext, moved.keyVersion, ...(plan.alsoSet ? [alsoValue] : []), ...row.position, row.keyVersion];
      if (sqlite) sqlite.update.run(...values);
      else await pgRun(db as PgStore, update, values);
    },
  };
}

const KEY_HASH_ONLY_FLAG = "--key-hash-only-audit-events";

function parseBatchSize(args: string[]): number | undefined {
  let size = DEFAULT_BATCH_SIZE;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === KEY_HASH_ONLY_FLAG) continue;
    const text = arg === "--batch-size" ? args[++i] : arg.startsWith("--batch-size=") ? arg.slice("--batch-size=".length) : undefined;
    if (text === undefined || !/^[1-9]\d{0,5}$/.test(text)) return undefined;
    size = Number(text);
  }
  return size;
}

const USAGE =
  `Usage: secrets-server rotate-key [--batch-size N] [${KEY_HASH_ONLY_FLAG}]\n` +
  "  --batch-size N                 records per transaction, 1 to 999999 (default 200)\n" +
  `  ${KEY_HASH_ONLY_FLAG}  also key the audit events an older version chained by hash only,\n` +
  "                                 vouching for them as they are (see audit verify's output first)\n";

export async function rotateKeyCommand(args: string[]): Promise<number> {
  // main.ts passes ["help"] for a help flag.
  if (args.length === 1 && args[0] === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const batchSize = parseBatchSize(args);
  if (batchSize === undefined) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig();
  // Before the keyring: in development it would write a new key file into the wrong folder.
  requireDatabaseFile(config);
  const keyring = loadKeyring(config);
  const db = await openStore(config);
  try {
    // Refuses a wrong key, or records on a key version that is not configured.
    await checkMasterKeys(db, keyring, new Date());
    let stopRequested = false;
    const stop = () => {
      stopRequested = true;
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    const result = await rotateRecords(db, keyring, {
      batchSize,
      keyHashOnly: args.includes(KEY_HASH_ONLY_FLAG),
      shouldStop: () => stopRequested,
      output: { out: (line) => console.log(line), err: (line) => console.error(line) },
    });
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    if (result.auditBreak !== undefined) {
      console.error(
        `The audit log does not verify at ${result.auditBreak}.\n` +
          "rotate-key re-keys the audit log only after verifying it, so it stopped and changed nothing. " +
          'Run "secrets-server audit verify", find out what happened to the log, and keep every older key in MASTER_KEYS_PREVIOUS meanwhile.',
      );
      return 1;
    }
    const counts = await createEncryptedRecordCounter(db).count(keyring.currentVersion);
    // Events a server still configured with an older MASTER_KEY may have written meanwhile.
    const audit = await createAuditRepo(db).countNotKeyedWith(keyring.currentVersion);
    // Hash-only events left on purpose are verify's to report, not a failure of this run.
    const auditLeft = audit.other - (args.includes(KEY_HASH_ONLY_FLAG) ? 0 : audit.hashOnly);
    const rekeyed = plural(result.auditEventsRekeyed, "audit event");
    if (result.interrupted) {
      console.log(
        `Interrupted after ${plural(result.reencrypted, "record")} re-encrypted and ${rekeyed} re-keyed. Nothing is half done: run rotate-key again to continue.`,
      );
      return 130;
    }
    // Audit events are counted apart: they are MACed, not encrypted.
    console.log(
      `Done: ${plural(result.reencrypted, "record")} re-encrypted, ${rekeyed} re-keyed, ${plural(result.projectKeysRemoved, "old project data key")} removed. ` +
        `${counts.onCurrentKeyVersion} of ${plural(counts.total, "record")} and ${audit.total - auditLeft} of ${plural(audit.total, "audit event")} ` +
        `are on key version ${keyring.currentVersion}.`,
    );
    if (result.failed > 0) {
      console.error(
        `${plural(result.failed, "record")} could not be decrypted and still need their old key (see above); keep it in MASTER_KEYS_PREVIOUS.`,
      );
      return 1;
    }
    if (counts.other > 0) {
      // Sealed after this run walked past them, by a server still on the old key.
      console.error(
        `${plural(counts.other, "record")} written meanwhile ${counts.other === 1 ? "is" : "are"} not on key version ${keyring.currentVersion} ` +
          "(is a server still running with the old MASTER_KEY?); keep the older keys in MASTER_KEYS_PREVIOUS, restart every server with the new key and run rotate-key again.",
      );
      return 1;
    }
    if (audit.isCheckpointStale) {
      // Pruned meanwhile by a server still on the old key: its checkpoint needs that key.
      console.error(
        `The audit log's retention checkpoint is not signed with version ${keyring.currentVersion} ` +
          "(is a server still running with the old MASTER_KEY?); keep the older keys in MASTER_KEYS_PREVIOUS and run rotate-key again.",
      );
      return 1;
    }
    if (auditLeft > 0) {
      console.error(
        `${plural(auditLeft, "audit event")} written meanwhile ${auditLeft === 1 ? "is" : "are"} not keyed with version ${keyring.currentVersion} ` +
          "(is a server still running with the old MASTER_KEY?); keep the older keys in MASTER_KEYS_PREVIOUS and run rotate-key again.",
      );
      return 1;
    }
    if (config.previousMasterKeys.trim()) {
      console.log("Older keys are no longer needed: remove them from MASTER_KEYS_PREVIOUS and restart the server.");
    }
    return 0;
  } finally {
    await closeStore(db);
  }
}
