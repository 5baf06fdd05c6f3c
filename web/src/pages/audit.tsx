// The audit log: filters, newest first, "load more" by cursor, one readable line each.
import { useEffect, useRef, useState } from "preact/hooks";
import { get, projectPath, type AuditEvent, type AuditEventPage, type Member, type Project, type ServiceAccount } from "../api.ts";
import { ErrorText, Time, messageOf, useLoad, whoLabel } from "../ui.tsx";

export const CATEGORIES: Record<string, string[]> = {
  secrets: [
    "secret.created",
    "secret.updated",
    "secret.deleted",
    "secret.rolled_back",
    "secret.revealed",
    "secret.version_revealed",
    "secrets.exported",
    "secrets.imported",
  ],
  access: [
    "member.role_changed",
    "member.removed",
    "member.left",
    "invitation.created",
    "invitation.revoked",
    "invitation.accepted",
    "environment_access.granted",
    "environment_access.revoked",
    "service_account.created",
    "service_account.updated",
    "service_account.deleted",
    "service_token.created",
    "service_token.revoked",
    "service_account_trust.created",
    "service_account_trust.deleted",
    "service_account.token_exchanged",
  ],
  project: ["project.created", "project.updated", "project.deleted"],
  integrations: [
    "integration.connected",
    "integration.updated",
    "integration.disconnected",
    "integration.paused",
    "integration.synced",
    "integration.sync_failed",
    "integration.redeployed",
  ],
};

function str(value: unknown): string | undefined {
  return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
}

function list(value: unknown): string | undefined {
  return Array.isArray(value) && value.length > 0 ? value.map(String).join(", ") : undefined;
}

/** What changed in a service_account.updated event, as one phrase. */
function accountChanges(m: Record<string, unknown>): string {
  const name = str(m.name) ?? "a service account";
  const parts: string[] = [];
  if (str(m.previousName)) parts.push(`renamed service account ${str(m.previousName)} to ${name}`);
  if (str(m.previousRole)) parts.push(`changed the role of ${parts.length ? "it" : `service account ${name}`} from ${str(m.previousRole)} to ${str(m.role) ?? "?"}`);
  if (Array.isArray(m.previousEnvironments)) {
    parts.push(`changed the environments of ${parts.length ? "it" : `service account ${name}`} from ${list(m.previousEnvironments) ?? "none"} to ${list(m.environments) ?? "none"}`);
  }
  if (m.descriptionChanged) parts.push(`changed the description of ${parts.length ? "it" : `service account ${name}`}`);
  return parts.length ? parts.join(", and ") : `changed service account ${name}`;
}

/** One sentence per action, from the fields the log may carry (never values). */
export function describe(event: AuditEvent): string {
  const m = event.metadata ?? {};
  const key = str(m.key);
  const env = str(m.environment);
  const inEnv = env ? ` in ${env}` : "";
  const k = key ? ` ${key}` : "";
  const count = str(m.count) ?? str(m.keyCount) ?? str(m.keys);
  const email = str(m.email);
  const role = str(m.role);
  switch (event.action) {
    case "secret.created":
      return `created secret${k}${inEnv}`;
    case "secret.updated":
      if (m.keyChanged && m.valueChanged) return `renamed ${str(m.previousKey) ?? "a secret"} to${k} and changed its value${inEnv}`;
      if (m.keyChanged) return `renamed secret ${str(m.previousKey) ?? ""} to${k}${inEnv}`;
      return `changed the value of${k}${inEnv}${str(m.version) ? ` (now version ${str(m.version)})` : ""}`;
    case "secret.deleted":
      return `deleted secret${k}${inEnv}`;
    case "secret.rolled_back":
      return `restored${k}${inEnv}${str(m.restoredFromVersion) ? ` to the value of version ${str(m.restoredFromVersion)}` : ""}`;
    case "secret.revealed":
      return `revealed the value of${k}${inEnv}`;
    case "secret.version_revealed":
      return `revealed an earlier value of${k}${inEnv}${str(m.versionNumber) ? ` (version ${str(m.versionNumber)})` : ""}`;
    case "secrets.exported":
      return `exported ${count ? `${count} ${count === "1" ? "secret" : "secrets"}` : "the secrets"}${inEnv}`;
    case "secrets.imported":
      return `imported secrets${inEnv}${m.created !== undefined ? ` (${str(m.created)} created, ${str(m.updated) ?? 0} updated, ${str(m.skipped) ?? 0} skipped)` : ""}`;
    case "member.role_changed":
      return `changed the role of ${email ?? "a member"}${str(m.from) ? ` from ${str(m.from)}` : ""}${str(m.to) ? ` to ${str(m.to)}` : ""}`;
    case "member.removed":
      return `removed ${email ?? "a member"} from the project`;
    case "member.left":
      return "left the project";
    case "invitation.created":
      return `invited ${email ?? "someone"}${role ? ` as ${role}` : ""}`;
    case "invitation.revoked":
      if (m.reason === "inviter_lost_access") return `voided the invitation of ${email ?? "someone"}: its inviter can no longer invite`;
      return `revoked the invitation of ${email ?? "someone"}`;
    case "invitation.accepted":
      return `accepted an invitation${role ? ` as ${role}` : ""}`;
    case "environment_access.granted":
      return `granted ${email ?? "a member"} access${inEnv}`;
    case "environment_access.revoked":
      return `revoked the access of ${email ?? "a member"}${inEnv}`;
    case "service_account.created":
      return `created service account ${str(m.name) ?? ""}${role ? ` as ${role}` : ""}${list(m.environments) ? ` for ${list(m.environments)}` : ""}`;
    case "service_account.updated":
      return accountChanges(m);
    case "service_account.deleted":
      return `deleted service account ${str(m.name) ?? ""}`;
    case "service_token.created":
      return `created token ${str(m.name) ?? ""} for service account ${str(m.serviceAccountName) ?? ""}${str(m.expiresAt) ? "" : " (no expiry)"}${list(m.allowedCidrs) ? `, accepted only from ${list(m.allowedCidrs)}` : ""}`;
    case "service_token.revoked":
      return `revoked token ${str(m.name) ?? ""} of service account ${str(m.serviceAccountName) ?? ""}`;
    case "service_account_trust.created":
      return `added a trust to service account ${str(m.serviceAccountName) ?? ""}: ${str(m.subject) ?? "?"} from ${str(m.issuer) ?? "?"}`;
    case "service_account_trust.deleted":
      return `removed a trust from service account ${str(m.serviceAccountName) ?? ""}: ${str(m.subject) ?? "?"} from ${str(m.issuer) ?? "?"}`;
    case "service_account.token_exchanged":
      return `exchanged an identity token of ${str(m.subject) ?? "a workload"} from ${str(m.issuer) ?? "its issuer"} for an access token`;
    case "project.created":
      return "created the project";
    case "project.updated":
      return m.previousName && m.name ? `renamed the project from ${str(m.previousName)} to ${str(m.name)}` : "changed the project's description";
    case "project.deleted":
      return "deleted the project";
    case "integration.connected":
      return "connected Vercel";
    case "integration.updated":
      return "changed the Vercel settings";
    case "integration.disconnected":
      return "disconnected Vercel";
    case "integration.paused":
      return "paused Vercel syncing: the person who connected it no longer manages integrations";
    case "integration.synced":
      return `synced secrets to Vercel${m.created !== undefined ? ` (${str(m.created)} created, ${str(m.updated) ?? 0} updated, ${str(m.skipped) ?? 0} skipped, ${str(m.failed) ?? 0} failed)` : ""}`;
    case "integration.sync_failed":
      return `tried to sync to Vercel, which failed${str(m.error) ? `: ${str(m.error)}` : ""}`;
    case "integration.redeployed":
      return "triggered a Vercel redeploy";
    default:
      return `${event.action}${k}${inEnv}`;
  }
}

/**
 * Starts the sentence: "You", "System", "A former member", "Service account deploy-bot"; an
 * e-mail address stays as it is.
 */
function actorLabel({ actor, serviceAccount }: AuditEvent): string {
  if (serviceAccount) return `Service account ${serviceAccount.name}`;
  const label = whoLabel(actor);
  return actor?.email && !actor.isYou ? label : label.charAt(0).toUpperCase() + label.slice(1);
}

/**
 * A date picked in the From/To fields, as the bounds of that day in this browser's time zone
 * (the times shown are local; the API reads a bare YYYY-MM-DD as a UTC day). `end` gives the
 * day's last millisecond, which the API includes.
 */
export function localDayBound(date: string, end: boolean): string {
  const [year, month, day] = date.split("-").map(Number) as [number, number, number];
  // setFullYear, not the constructor, which reads years 0 to 99 as 1900 to 1999.
  const midnight = new Date(0);
  midnight.setFullYear(year, month - 1, end ? day + 1 : day);
  midnight.setHours(0, 0, 0, 0);
  return new Date(midnight.getTime() - (end ? 1 : 0)).toISOString();
}

interface Filters {
  category: string;
  action: string;
  actor: string;
  from: string;
  to: string;
}

const EMPTY: Filters = { category: "", action: "", actor: "", from: "", to: "" };

export function AuditPage({ project }: { project: Project }) {
  const base = projectPath(project.id);
  const members = useLoad(() => get<{ members: Member[] }>(`${base}/members`).then((r) => r.members), [base]);
  // The actor filter takes a service account's id too; only those who manage them can list them.
  const canListAccounts = project.permissions.includes("service_accounts:manage");
  const accounts = useLoad(
    () => (canListAccounts ? get<{ serviceAccounts: ServiceAccount[] }>(`${base}/service-accounts`).then((r) => r.serviceAccounts) : Promise.resolve([])),
    [base, canListAccounts],
  );
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [events, setEvents] = useState<AuditEvent[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  // The first load starts in an effect, after the first paint: until then this is loading, not "No events match."
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | undefined>(undefined);

  // Filters applied twice in a row start two requests; only the latest one may fill the list.
  const latest = useRef(0);

  async function load(f: Filters, after: string | null) {
    const request = ++latest.current;
    if (!after) {
      setEvents([]);
      setCursor(null);
    }
    setLoading(true);
    setError(undefined);
    try {
      const q = new URLSearchParams({ limit: "50" });
      if (f.action) q.set("action", f.action);
      else if (f.category) q.set("category", f.category);
      if (f.actor) q.set("actor", f.actor);
      if (f.from) q.set("from", localDayBound(f.from, false));
      if (f.to) q.set("to", localDayBound(f.to, true));
      if (after) q.set("cursor", after);
      const page = await get<AuditEventPage>(`${base}/audit?${q}`);
      if (request !== latest.current) return;
      setEvents((old) => (after ? [...old, ...page.events] : page.events));
      setCursor(page.nextCursor);
    } catch (e) {
      if (request === latest.current) setError(messageOf(e));
    } finally {
      if (request === latest.current) setLoading(false);
    }
  }

  useEffect(() => {
    void load(filters, null);
  }, [base, filters]);

  const actions = draft.category ? CATEGORIES[draft.category]! : Object.values(CATEGORIES).flat();
  const people = (members.data ?? []).map((m) => (
    <option key={m.userId} value={m.userId}>
      {m.isYou ? `you (${m.email ?? m.userId})` : (m.email ?? m.userId)}
    </option>
  ));
  const serviceAccounts = accounts.data ?? [];
  const set = (field: keyof Filters) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setDraft({ ...draft, [field]: e.currentTarget.value });

  return (
    <div class="stack">
      <h2>Audit log</h2>
      <form
        class="card filters"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters({ ...draft });
        }}
      >
        <label class="field">
          <span>Category</span>
          <select value={draft.category} onChange={(e) => setDraft({ ...draft, category: e.currentTarget.value, action: "" })}>
            <option value="">All</option>
            {Object.keys(CATEGORIES).map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Action</span>
          <select value={draft.action} onChange={set("action")}>
            <option value="">All</option>
            {actions.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Actor</span>
          <select value={draft.actor} onChange={set("actor")}>
            <option value="">Anyone</option>
            {serviceAccounts.length > 0 ? (
              <>
                <optgroup label="People">{people}</optgroup>
                <optgroup label="Service accounts">
                  {serviceAccounts.map((a) => (
                    <option key={a.id} value={a.id}>
                      {`service account ${a.name}`}
                    </option>
                  ))}
                </optgroup>
              </>
            ) : (
              people
            )}
          </select>
        </label>
        <label class="field">
          <span>From</span>
          <input type="date" value={draft.from} onInput={set("from")} />
        </label>
        <label class="field">
          <span>To</span>
          <input type="date" value={draft.to} onInput={set("to")} />
        </label>
        <div class="actions">
          <button type="submit" class="primary">
            Apply filters
          </button>
          <button
            type="button"
            onClick={() => {
              setDraft(EMPTY);
              setFilters(EMPTY);
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <ErrorText error={error} />
      {events.length === 0 && !loading && !error && <p class="empty">No events match.</p>}
      {events.length > 0 && (
        <ol class="audit-list" aria-label="Audit events, newest first">
          {events.map((event) => (
            <li key={event.id}>
              <Time iso={event.at} />
              <span class="audit-line">
                <strong>{actorLabel(event)}</strong> {describe(event)}
                {event.metadata?.via === "cli" && <span class="badge">CLI</span>}
                {event.metadata?.via === "service_token" && <span class="badge">service token</span>}
                {event.metadata?.via === "workload" && <span class="badge">workload identity</span>}
              </span>
              <code class="small muted">{event.action}</code>
            </li>
          ))}
        </ol>
      )}
      {loading && (
        <p class="muted" role="status">
          Loading…
        </p>
      )}
      {cursor && !loading && (
        <button type="button" onClick={() => void load(filters, cursor)}>
          Load more
        </button>
      )}
    </div>
  );
}
