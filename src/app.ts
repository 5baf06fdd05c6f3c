import { setMaxListeners } from "node:events";
import fs from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Writable } from "node:stream";
import cookie from "@fastify/cookie";
import rateLimit from "@fastify/rate-limit";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from "fastify";
import { validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import type { Logger } from "pino";
import { z } from "zod";
import { registerApiDocsRoutes } from "./api-docs/api-docs.routes.ts";
import { registerOpenApi } from "./api-docs/openapi.ts";
import { createAuditRepo } from "./audit/audit.repo.ts";
import { createAuditRetention, type PruneResult } from "./audit/audit.retention.ts";
import { registerAuditRoutes } from "./audit/audit.routes.ts";
import { createAuditService } from "./audit/audit.service.ts";
import { createAuditWriter } from "./audit/audit.writer.ts";
import { createAccessTokensRepo } from "./cli-auth/access-tokens.repo.ts";
import { createCliAuthRepo } from "./cli-auth/cli-auth.repo.ts";
import { registerCliAuthRoutes } from "./cli-auth/cli-auth.routes.ts";
import { createCliAuthService } from "./cli-auth/cli-auth.service.ts";
import { createAccessGuard } from "./core/access.ts";
import { ErrorBody } from "./core/api-schemas.ts";
import { createAuth, rateLimitKey } from "./core/auth.ts";
import { type Clock, systemClock } from "./core/clock.ts";
import { boundTo, type Config } from "./core/config.ts";
import { answerClientError, answerExpectation, closeServer, createGracefulStop, serverTimeouts } from "./core/connections.ts";
import { type Keyring, loadKeyring } from "./core/crypto.ts";
import { errorCode, rootMessage } from "./core/error-text.ts";
import { HttpError, registerErrorHandling } from "./core/errors.ts";
import { createIdleGc } from "./core/idle-gc.ts";
import { serializerCompiler } from "./core/json-body.ts";
import { createLogger, OneLinePerRequest } from "./core/logging.ts";
import { createRateLimitStore } from "./core/rate-limit-store.ts";
import { registerRequestHooks } from "./core/request-hooks.ts";
import { createSecurityHeaders } from "./core/security-headers.ts";
import { createStorageMonitor, storageCondition } from "./core/storage.ts";
import { checkMasterKeys, closeStore, openStore, type Store } from "./core/store.ts";
import { createVault } from "./core/vault.ts";
import { createWalMaintenance } from "./core/wal.ts";
import { createVercelClient } from "./integrations/vercel/vercel.client.ts";
import { createVercelPause } from "./integrations/vercel/vercel.pause.ts";
import { createVercelRepo } from "./integrations/vercel/vercel.repo.ts";
import { registerVercelRoutes } from "./integrations/vercel/vercel.routes.ts";
import { createVercelService } from "./integrations/vercel/vercel.service.ts";
import { createVercelSync } from "./integrations/vercel/vercel.sync.ts";
import { registerInboxRoutes } from "./invitations/inbox.routes.ts";
import { createInboxService } from "./invitations/inbox.service.ts";
import { createInvitationMailer } from "./invitations/invitation-mail.ts";
import { createInvitationsRepo } from "./invitations/invitations.repo.ts";
import { registerInvitationRoutes } from "./invitations/invitations.routes.ts";
import { createInvitationsService, describeInvitation } from "./invitations/invitations.service.ts";
import { wireLostRights } from "./lost-rights.ts";
import { createAccessRepo } from "./members/access.repo.ts";
import { createEnvironmentAccessService } from "./members/environment-access.service.ts";
import { createMembersRepo } from "./members/members.repo.ts";
import { registerMemberRoutes } from "./members/members.routes.ts";
import { createMembersService } from "./members/members.service.ts";
import { createProjectsRepo } from "./projects/projects.repo.ts";
import { registerProjectRoutes } from "./projects/projects.routes.ts";
import { createProjectsService } from "./projects/projects.service.ts";
import { registerCompareRoutes } from "./secrets/compare.routes.ts";
import { createCompareService } from "./secrets/compare.service.ts";
import { registerCopyRoutes } from "./secrets/copy.routes.ts";
import { createCopyService } from "./secrets/copy.service.ts";
import { createExportMemo } from "./secrets/export-memo.ts";
import { createSecretsRepo } from "./secrets/secrets.repo.ts";
import { registerSecretRoutes } from "./secrets/secrets.routes.ts";
import { createSecretsService } from "./secrets/secrets.service.ts";
import { createServiceAccountsRepo } from "./service-accounts/service-accounts.repo.ts";
import { registerServiceAccountRoutes } from "./service-accounts/service-accounts.routes.ts";
import { createServiceAccountsService } from "./service-accounts/service-accounts.service.ts";
import { createWorkloadIdentityService } from "./service-accounts/workload-identity.service.ts";
import { createBrowserSessionsRepo } from "./sign-in/browser-sessions.repo.ts";
import { createLocalRepo } from "./sign-in/local.repo.ts";
import { registerLocalRoutes } from "./sign-in/local.routes.ts";
import { createLocalAccounts, type IssuedLink } from "./sign-in/local.service.ts";
import { registerOidcRoutes } from "./sign-in/oidc.routes.ts";
import { createOidcService, type OidcService } from "./sign-in/oidc.service.ts";
import { registerSignInRoutes } from "./sign-in/sign-in.routes.ts";
import { registerUiRoutes } from "./ui/ui.routes.ts";
import { createUsersRepo } from "./users/users.repo.ts";
import { createUsersService } from "./users/users.service.ts";
import { VALIDATION_MESSAGES } from "./validation-messages.ts";

export interface AppOptions {
  clock?: Clock;
  /** Where log lines go (stdout by default); tests collect them to prove no secret is logged. */
  logStream?: Writable;
  /** Runs before each group-commit sync of the WAL (core/group-commit.ts); tests hold it to see answers wait for the disk. */
  beforeWalSync?: () => Promise<void>;
  /** Instead of stopping the process when a WAL sync fails (tests, which run servers in their own process). */
  onWalSyncFailure?: () => void;
  /** How often the rate-limit counts are saved (5 s); tests that hold WAL syncs save them at close only. */
  rateLimitSaveEveryMs?: number;
}

/**
 * After a failed fsync nothing may touch the database again, SQLite's checkpoint at close
 * included (it would copy WAL pages the kernel may have dropped into the database file), so
 * the process ends as in a crash: systemd starts it again, and SQLite recovers from what
 * reached the disk, which holds every write that was acknowledged. PostgreSQL does the same.
 */
function stopAtOnce(): void {
  // The log's stdout may be a pipe with a backlog, lost with the process: stderr, written now.
  try {
    fs.writeSync(2, "secrets-server: fsync of the database's WAL failed; stopping at once (see the log line before).\n");
  } catch {
    // Nothing more can be done to tell anyone.
  }
  process.kill(process.pid, "SIGKILL");
  // Reached only where SIGKILL to oneself is ignored (PID 1 in a container without an init).
  process.abort();
}

export interface App {
  app: FastifyInstance;
  db: Store;
  config: Config;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  /** Call once listening: what the operator must be told then (the first-run setup link). */
  announce(): Promise<void>;
  /** Graceful stop, before close(): see GracefulStop.drain in core/connections.ts. */
  drain(drainMs: number, cut?: AbortSignal): Promise<{ closedAtDeadline: number }>;
  /** What the server's timers do, for tests and tools that cannot wait an hour. */
  maintenance: {
    /** Prunes audit events past AUDIT_RETENTION_DAYS now (nothing when it is unset). */
    pruneAuditLog(): Promise<PruneResult>;
    /** Empties the WAL into the database; false when another connection was in the way. */
    truncateWal(): boolean;
  };
  close(): Promise<void>;
}

/**
 * Fastify ignores a plain hop count (it trusts no proxy then), so TRUST_PROXY=<n> is passed
 * as the function it used to build: the socket peer and the next n-1 addresses of
 * X-Forwarded-For are proxies. That is only safe when the proxies are the only way in
 * (README, Configuration); buildApp warns when HOST is not loopback.
 */
function fastifyTrustProxy(trustProxy: Config["trustProxy"]): false | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trustProxy !== "number") return trustProxy;
  return (_address, hop) => hop < trustProxy;
}

const LOOPBACK_LISTEN_HOSTS = new Set(["127.0.0.1", "localhost", "::1"]);

/** Opens the database, wires every module by hand and returns the (not yet listening) server. */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<App> {
  const clock = options.clock ?? systemClock;
  const log = await createLogger(config, options.logStream);
  const keyring = loadKeyring(config, log);
  const db = await openStore(config, {
    warn: (message) => log.warn(message),
    groupCommit: {
      beforeSync: options.beforeWalSync,
      onFailure: (error) => {
        log.fatal(
          // The fields of the storage monitor's lines: the errno of the fsync and its sentence.
          { storage: "unsynced", code: errorCode(error.cause), cause: rootMessage(error) },
          "fsync of the database's WAL failed: the server stops now, so that nothing touches the database again. Check the disk and the kernel log; at the next start SQLite recovers from what reached the disk, which holds every acknowledged write.",
        );
        (options.onWalSyncFailure ?? stopAtOnce)();
      },
    },
  });
  try {
    await checkMasterKeys(db, keyring, clock.now());
  } catch (error) {
    await closeStore(db);
    throw error;
  }

  if (typeof config.trustProxy === "number" && config.trustProxy > 0 && !LOOPBACK_LISTEN_HOSTS.has(config.host)) {
    log.warn(
      `TRUST_PROXY=${config.trustProxy} trusts X-Forwarded-For from whoever connects, and HOST=${config.host} accepts connections from other machines: make sure only your proxy can reach this port, or set TRUST_PROXY to the proxy's addresses instead.`,
    );
  }

  const securityHeaders = createSecurityHeaders({ hsts: config.isProduction });
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: 1024 * 1024,
    trustProxy: fastifyTrustProxy(config.trustProxy),
    // The UI is served at every path the API does not claim; keep /x and /x/ the same.
    routerOptions: { ignoreTrailingSlash: true },
    // No automatic HEAD twin of every GET: a HEAD on a secret would decrypt it and write a
    // `secret.revealed` event while returning nothing.
    exposeHeadRoutes: false,
    logController: new OneLinePerRequest(),
    ...serverTimeouts(config),
    clientErrorHandler: answerClientError,
    // Errors Fastify raises before routing (a malformed %-escape, an over-long path
    // parameter) get the same { error } body as every other error.
    frameworkErrors: (error, req, reply) => {
      const status = typeof error.statusCode === "number" && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
      // No hook runs for these answers: the headers every answer carries are set here.
      securityHeaders(req.raw, reply.raw, () => undefined);
      // Typed loosely by Fastify at this stage (no route, so no reply schema).
      void (reply as unknown as FastifyReply)
        .code(status)
        .header("cache-control", "no-store")
        .send({
          error: status === 414 ? "The address is too long." : "The address could not be understood.",
        });
    },
  });
  app.server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    securityHeaders(req, res, () => undefined);
    answerExpectation(res);
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // An empty JSON body is no body: api.md lets a client leave out the bodies of device start,
  // sync and restore, and `curl -H 'content-type: application/json'` without -d sends just
  // that. A route that needs a body refuses it through its own schema's message.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser<string>("application/json", { parseAs: "string" }, (req, body, done) => {
    if (body.length === 0) return done(null, undefined);
    void parseJson(req, body, done);
  });
  const storage = createStorageMonitor(db, config.dataDir, log);
  registerErrorHandling(app, storage, VALIDATION_MESSAGES);
  // Background work (saving rate-limit counts, WAL checkpoints) meets the same full or failing
  // disk as requests do: reported through the storage monitor, once a minute and without a stack.
  const backgroundError = (error: unknown, what: string) => {
    const condition = storageCondition(error);
    if (condition) storage.report(condition, error);
    else log.error({ err: error }, what);
  };
  const wal = createWalMaintenance(db, log, { onError: backgroundError });
  const idleGc = createIdleGc(log);
  // First of all hooks: while stopping, a request is refused before any work.
  const gracefulStop = createGracefulStop(app);
  registerRequestHooks(app, {
    stop: gracefulStop,
    securityHeaders,
    afterResponse: () => {
      wal.noteRequest();
      idleGc.noteRequest();
    },
  });
  await app.register(cookie);
  // Before any route: it collects them as they are registered.
  await registerOpenApi(app, config, VALIDATION_MESSAGES);

  app.addHook("onClose", async () => wal.stop());
  app.addHook("onClose", async () => idleGc.stop());
  const retention =
    config.auditRetentionDays === undefined
      ? undefined
      : createAuditRetention({
          db,
          keyring,
          clock,
          log,
          retentionDays: config.auditRetentionDays,
          afterPrune: () => wal.afterLargeWrite(),
        });
  if (retention) app.addHook("onClose", async () => retention.stop());

  const access = createAccessGuard(createAccessRepo(db), clock);
  const audit = createAuditWriter(db, clock, keyring);
  if (await createAuditRepo(db).startsHashOnly()) {
    log.warn(
      'The audit log starts with events chained by hash only (written before this version keyed the chain). Run "secrets-server audit verify" and follow what it says to key them.',
    );
  }
  // Before auth: service tokens are resolved by their own feature on every request.
  const serviceAccountsRepo = createServiceAccountsRepo(db);
  const projectsRepo = createProjectsRepo(db);
  const serviceAccounts = createServiceAccountsService({ db, repo: serviceAccountsRepo, projects: projectsRepo, access, audit, clock });
  const browserSessionsRepo = createBrowserSessionsRepo(db);
  const auth = createAuth(
    { browserSessions: browserSessionsRepo, accessTokens: createAccessTokensRepo(db) },
    config,
    clock,
    serviceAccounts,
  );
  auth.register(app);

  // Counted in memory, saved every few seconds and at close: a restart keeps the windows.
  const rateLimits = createRateLimitStore(db, clock, { saveEveryMs: options.rateLimitSaveEveryMs });
  // A storage fault at close (a full disk, a failed sync) is reported, not thrown: the
  // counts are a minute's worth, and the database must still be closed.
  app.addHook("onClose", async () => rateLimits.stop().catch((error) => backgroundError(error, "could not save rate-limit counters")));
  await app.register(rateLimit, {
    store: rateLimits.Store,
    global: true,
    max: config.rateLimitPerMinute,
    timeWindow: 60_000,
    // onRequest: before the body is read or any work is done, so a caller over a limit
    // costs nothing (an 11th import is refused before its 2 MB arrive). The credential is
    // already resolved by then (auth's onRequest hook is the app's, registered above; a
    // limit's hook is the route's, and those run after), so limits count per user.
    hook: "onRequest",
    keyGenerator: rateLimitKey,
    errorResponseBuilder: (_req, context) => ({
      statusCode: 429,
      message: `Too many requests. Try again in ${Math.max(1, Math.ceil(context.ttl / 1000))} seconds.`,
    }),
  });
  auth.refuseBadServiceTokens(app);

  const cliAuthRepo = createCliAuthRepo(db);
  const localRepo = createLocalRepo(db);
  const users = createUsersService({
    db,
    users: createUsersRepo(db),
    browserSessions: browserSessionsRepo,
    cliSessions: cliAuthRepo,
    accountLinks: localRepo,
    clock,
  });
  let oidc: OidcService | undefined;
  try {
    // Discovery at start: a production server with a wrong issuer refuses to start.
    if (config.authProvider === "oidc") oidc = await createOidcService({ config, clock, users, log });
  } catch (error) {
    await closeStore(db);
    throw error;
  }
  const vault = createVault(db, keyring, clock);
  const membersRepo = createMembersRepo(db);
  const secretsRepo = createSecretsRepo(db);
  const exportMemo = createExportMemo();
  const projects = createProjectsService({
    db,
    repo: projectsRepo,
    memberships: membersRepo,
    secrets: secretsRepo,
    access,
    audit,
    vault,
    exportMemo,
    clock,
  });
  const secrets = createSecretsService({
    db,
    repo: secretsRepo,
    memberships: membersRepo,
    access,
    audit,
    vault,
    exportMemo,
    clock,
    log,
    afterLargeWrite: () => wal.afterLargeWrite(),
  });
  const members = createMembersService({ db, repo: membersRepo, access, audit, clock });
  const invitationsRepo = createInvitationsRepo(db);
  const invitationContext = describeInvitation(projectsRepo, users);
  const invitations = createInvitationsService({
    db,
    repo: invitationsRepo,
    memberships: membersRepo,
    context: invitationContext,
    access,
    audit,
    clock,
    config,
    mailer: createInvitationMailer({ repo: invitationsRepo, context: invitationContext }, config, log),
  });
  const inbox = createInboxService({ repo: invitationsRepo, memberships: membersRepo, invitations, clock });
  const environmentAccess = createEnvironmentAccessService({ db, repo: membersRepo, access, audit, clock });
  const cliAuth = createCliAuthService({ db, repo: cliAuthRepo, users, clock, config, log });
  // Vercel: every URL from VERCEL_API_URL; aborting on close makes a running sync end at once.
  const vercelShutdown = new AbortController();
  // Every Vercel call under way listens to it: many projects syncing at once are not a leak.
  setMaxListeners(0, vercelShutdown.signal);
  const vercelRepo = createVercelRepo(db);
  const vercelClient = createVercelClient({
    baseUrl: config.vercelApiUrl,
    log,
    retryBaseMs: config.vercelRetryBaseMs,
    shutdown: vercelShutdown.signal,
  });
  const vercelSync = createVercelSync({
    db,
    repo: vercelRepo,
    vault,
    audit,
    clock,
    client: vercelClient,
    secrets,
    log,
    debounceMs: config.syncDebounceMs,
    retryMs: config.syncRetryMs,
    leaseStaleMs: config.syncLeaseSeconds * 1000,
  });
  const vercel = createVercelService({
    db,
    repo: vercelRepo,
    users,
    access,
    audit,
    vault,
    clock,
    client: vercelClient,
    sync: vercelSync,
    vercelApiUrl: config.vercelApiUrl,
  });
  secrets.onChange((projectId, environment) => vercelSync.notifyChange(projectId, environment));
  wireLostRights(members, {
    invitations,
    vercel: createVercelPause({ repo: vercelRepo, access, audit, clock }),
    serviceTokens: serviceAccounts,
  });
  // A close without a drain first (tests, a failed start): before the server waits for the
  // requests under way, so a manual sync among them ends now (503, interrupted) instead of
  // holding the close for Vercel's timeouts and retries. `drain` does the same earlier.
  app.addHook("preClose", async () => vercelShutdown.abort());
  app.addHook("onClose", async () => {
    // Without the release another server takes the lease over once it is stale (SYNC_LEASE_SECONDS).
    await vercelSync.stop().catch((error) => backgroundError(error, "could not hand the Vercel scheduler lease on"));
  });

  // Degraded (503 with the reason) when the storage probe cannot write; `error` as every
  // error body has it, `reason` for monitors.
  app.withTypeProvider<ZodTypeProvider>().get(
    "/healthz",
    {
      config: { rateLimit: false },
      schema: {
        tags: ["Health"],
        summary: "Whether the server can serve",
        description: "503 with the reason (and Retry-After) while the storage cannot be written.",
        security: [],
        response: {
          200: z.object({ ok: z.literal(true) }),
          // Or the plain { error } of a server that is stopping.
          503: z.union([z.object({ ok: z.literal(false), reason: z.string(), error: z.string() }), ErrorBody]),
        },
      },
    },
    async (_req, reply) => {
      const health = await storage.health();
      if (health.ok) return { ok: true as const };
      const reason = health.reason ?? "The server cannot write to its storage.";
      return reply
        .code(503)
        .header("retry-after", String(health.retryAfterSeconds))
        .send({ ok: false as const, reason, error: reason });
    },
  );
  // PORT=0: the OS picked the port; record it (and the app URL that follows it) before
  // anything that names the URL runs.
  app.addHook("onListen", (done) => {
    boundTo(config, app.server.address());
    done();
  });
  registerSignInRoutes(app, { auth, config, clock, users });
  if (oidc) registerOidcRoutes(app, { auth, config, keyring, oidc, log });
  let announceSetupLink = async (): Promise<void> => {};
  if (config.authProvider === "local") {
    const local = createLocalAccounts({ db, users, repo: localRepo, config, clock, keyring });
    registerLocalRoutes(app, { auth, local });
    // Once listening (a server that could not bind must not replace the link another one
    // printed), so that the link names the port the server really has (PORT=0).
    announceSetupLink = async () => {
      if (await local.hasLocalUser()) return;
      let link: IssuedLink;
      try {
        link = await local.issueSetupLink();
      } catch (error) {
        // Someone set up the first account meanwhile: nothing to announce.
        if (error instanceof HttpError && error.statusCode === 409) return;
        throw error;
      }
      // First run: the one log line that carries a token, on purpose. It is for the operator,
      // only its hash is stored, and it is in the message (redaction covers fields only).
      log.warn(
        `No account exists yet. Create the first one at ${link.url} (one-time link, valid until ${link.expiresAt}; "secrets-server setup-link" prints a new one).`,
      );
    };
  }
  registerProjectRoutes(app, { auth, access, projects });
  registerSecretRoutes(app, { auth, access, secrets });
  registerCompareRoutes(app, { auth, access, compare: createCompareService({ db, repo: secretsRepo, access, audit, vault }) });
  registerCopyRoutes(app, { auth, access, copy: createCopyService({ db, repo: secretsRepo, access, audit, vault, secrets }) });
  registerAuditRoutes(app, {
    auth,
    access,
    audit: createAuditService({
      repo: createAuditRepo(db),
      writer: audit,
      access,
      config,
      keyring,
      clock,
      serviceAccountCounts: (projectId) => serviceAccounts.counts(projectId),
      openTrustAccounts: (projectId) => serviceAccounts.openTrustAccounts(projectId),
      members: membersRepo,
      invitations: invitationsRepo,
      hosting: vercelRepo,
    }),
  });
  registerMemberRoutes(app, { auth, access, members, environmentAccess });
  registerInvitationRoutes(app, { auth, access, invitations });
  registerInboxRoutes(app, { auth, inbox });
  registerServiceAccountRoutes(app, {
    auth,
    access,
    serviceAccounts,
    workloadIdentity: createWorkloadIdentityService({
      db,
      repo: serviceAccountsRepo,
      audit,
      clock,
      log,
    }),
  });
  registerCliAuthRoutes(app, { auth, cliAuth });
  registerVercelRoutes(app, { auth, access, vercel });
  registerApiDocsRoutes(app);
  registerUiRoutes(app);

  // Timers last: nothing below can fail and leave them running on a closed database.
  rateLimits.start((error) => backgroundError(error, "could not save rate-limit counters"));
  await vercelSync.start((error) => backgroundError(error, "could not renew the Vercel scheduler lease"));
  wal.start();
  idleGc.start();
  retention?.start();

  return {
    app,
    db,
    config,
    clock,
    keyring,
    log,
    announce: () => announceSetupLink(),
    drain: (drainMs, cut) => {
      // A running sync is cut as the stop begins, not when the drain ends: a manual one then
      // answers its 503 while its connection is still open.
      vercelShutdown.abort();
      return gracefulStop.drain(drainMs, cut);
    },
    maintenance: {
      pruneAuditLog: () => retention?.run() ?? Promise.resolve({ pruned: 0 }),
      truncateWal: () => wal.truncate(),
    },
    async close() {
      await closeServer(app);
      await closeStore(db);
    },
  };
}
