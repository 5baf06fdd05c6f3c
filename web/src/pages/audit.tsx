// The audit log: filters (in the URL, applied as they change), newest first, "load more" by cursor, one readable line each.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { type AuditEvent, type AuditEventPage, get, type Member, type Project, projectPath, request, type ServiceAccount } from "../api.ts";
import { localDayBound } from "../audit-dates.ts";
import { navigate, useLocation } from "../router.ts";
import { ErrorText, messageOf, Time, useAction, useLoad, whileBusy, whoLabel } from "../ui.tsx";
import { hasKeyShape } from "./secrets-common.tsx";
import { saveFile } from "./secrets-export.tsx";

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
    "secret.copied",
    "secrets.compared",
  ],
  access: [
    "member.role_changed",
    "member.removed",
    "member.left",
    "invitation.created",
    "invitation.revoked",
    "invitation.accepted",
    "invitation.link_renewed",
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
  project: ["project.created", "project.updated", "project.deleted", "audit.exported"],
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

/** The environments an invitation grants, named: ", with access to production and staging". */
function grants(m: Record<string, unknown>): string {
  if (!Array.isArray(m.environments) || m.environments.length === 0) return "";
  const names = m.environments.map(String);
  const named = names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`;
  return `, with access to ${named}`;
}

/** The filters an export was given, as a phrase. */
function exportFilters(value: unknown): string {
  if (!value || typeof value !== "object") return "";
  const parts = Object.entries(value as Record<string, unknown>).map(([name, v]) =>
    name === "actor" ? "one actor" : `${name} ${String(v)}`,
  );
  return parts.length ? `, filtered by ${parts.join(", ")}` : "";
}

/** What changed in a service_account.updated event, as one phrase. */
function accountChanges(m: Record<string, unknown>): string {
  const name = str(m.name) ?? "a service account";
  const parts: string[] = [];
  if (str(m.previousName)) parts.push(`renamed service account ${str(m.previousName)} to ${name}`);
  if (str(m.previousRole))
    parts.push(
      `changed the role of ${parts.length ? "it" : `service account ${name}`} from ${str(m.previousRole)} to ${str(m.role) ?? "?"}`,
    );
  if (Array.isArray(m.previousEnvironments)) {
    parts.push(
      `changed the environments of ${parts.length ? "it" : `service account ${name}`} from ${list(m.previousEnvironments) ?? "none"} to ${list(m.environments) ?? "none"}`,
    );
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
    case "secret.copied":
      return `copied${k} from ${env ?? "?"} to ${str(m.toEnvironment) ?? "?"}${m.result === "unchanged" ? " (the value was already the same)" : ""}`;
    case "secrets.compared":
      return `compared the values of ${count ?? "the"} ${count === "1" ? "key" : "keys"} across ${list(m.environments) ?? "environments"} (no value shown)`;
    case "member.role_changed":
      return `changed the role of ${email ?? "a member"}${str(m.from) ? ` from ${str(m.from)}` : ""}${str(m.to) ? ` to ${str(m.to)}` : ""}`;
    case "member.removed":
      return `removed ${email ?? "a member"} from the project`;
    case "member.left":
      return "left the project";
    case "invitation.created":
      return `invited ${email ?? "someone"}${role ? ` as ${role}` : ""}${grants(m)}`;
    case "invitation.revoked":
      if (m.reason === "inviter_lost_access") return `voided the invitation of ${email ?? "someone"}: its inviter can no longer invite`;
      return `revoked the invitation of ${email ?? "someone"}`;
    case "invitation.accepted":
      return `accepted an invitation${role ? ` as ${role}` : ""}${grants(m)}`;
    case "invitation.link_renewed":
      return `made a new invitation link for ${email ?? "someone"} (the old one no longer works)`;
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
      if (m.reason === "creator_lost_access") {
        return `revoked token ${str(m.name) ?? ""} of service account ${str(m.serviceAccountName) ?? ""}: the person who created it can no longer manage service accounts`;
      }
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
      return m.previousName && m.name
        ? `renamed the project from ${str(m.previousName)} to ${str(m.name)}`
        : "changed the project's description";
    case "project.deleted":
      return "deleted the project";
    case "audit.exported":
      return `downloaded ${count ? `${count} audit ${count === "1" ? "event" : "events"}` : "the audit log"}${str(m.format) ? ` as ${str(m.format)!.toUpperCase()}` : ""}${exportFilters(m.filters)}${m.truncated ? " (the newest only: more matched)" : ""}`;
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

interface Filters {
  category: string;
  action: string;
  actor: string;
  environment: string;
  key: string;
  from: string;
  to: string;
}

const FIELDS = ["category", "action", "actor", "environment", "key", "from", "to"] as const;
const EMPTY: Filters = { category: "", action: "", actor: "", environment: "", key: "", from: "", to: "" };
/** Typing a key waits this long for a pause before the list follows. */
const KEY_PAUSE_MS = 400;

/** The filters live in the page's URL (as picked: dates as days), so a filtered view can be shared and reloaded. */
function filtersOf(search: URLSearchParams): Filters {
  const filters = { ...EMPTY };
  for (const field of FIELDS) filters[field] = search.get(field) ?? "";
  // A hand-edited link's day that is not one (05/01/2024, x) is left out, as the date
  // field would show it: made into a bound it would stop the page.
  for (const field of ["from", "to"] as const) if (!isDay(filters[field])) filters[field] = "";
  // A hand-edited link's category that is none is left out (the select could not show it,
  // and the API would refuse it). An action shows its own category: the API lets the action
  // win, and the selects then say what the list holds.
  if (!Object.hasOwn(CATEGORIES, filters.category)) filters.category = "";
  const category = Object.keys(CATEGORIES).find((c) => CATEGORIES[c]!.includes(filters.action));
  if (category) filters.category = category;
  return filters;
}

/** A YYYY-MM-DD that names a day of the calendar. */
function isDay(text: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!match) return false;
  const [year, month, day] = match.slice(1).map(Number) as [number, number, number];
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  // The month's last day in that very year (setUTCFullYear: the constructor reads 0-99 as 19xx).
  const last = new Date(0);
  last.setUTCFullYear(year, month, 0);
  return day <= last.getUTCDate();
}

function pageQuery(filters: Filters): string {
  const q = new URLSearchParams();
  for (const field of FIELDS) if (filters[field]) q.set(field, filters[field]);
  return q.toString();
}

/** The API's query for filters: the action wins over the category; days become this browser's day bounds. */
function apiQuery(f: Filters): URLSearchParams {
  const q = new URLSearchParams();
  if (f.action) q.set("action", f.action);
  else if (f.category) q.set("category", f.category);
  if (f.actor) q.set("actor", f.actor);
  if (f.environment) q.set("environment", f.environment);
  if (f.key) q.set("key", f.key);
  if (f.from) q.set("from", localDayBound(f.from, false));
  if (f.to) q.set("to", localDayBound(f.to, true));
  return q;
}

export function AuditPage({ project }: { project: Project }) {
  const base = projectPath(project.id);
  const location = useLocation();
  const query = pageQuery(filtersOf(location.search));
  const filters = useMemo(() => filtersOf(new URLSearchParams(query)), [query]);
  const members = useLoad(() => get<{ members: Member[] }>(`${base}/members`).then((r) => r.members), [base]);
  // The actor filter takes a service account's id too; only those who manage them can list them.
  const canListAccounts = project.permissions.includes("service_accounts:manage");
  const accounts = useLoad(
    () =>
      canListAccounts
        ? get<{ serviceAccounts: ServiceAccount[] }>(`${base}/service-accounts`).then((r) => r.serviceAccounts)
        : Promise.resolve([]),
    [base, canListAccounts],
  );
  const [keyDraft, setKeyDraft] = useState(filters.key);
  const [events, setEvents] = useState<AuditEvent[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  // The first load starts in an effect, after the first paint: until then this is loading, not "No events match."
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | undefined>(undefined);

  // Filters changed twice in a row start two requests; only the latest one may fill the list.
  const latest = useRef(0);

  function apply(next: Filters) {
    const q = pageQuery(next);
    navigate(`${location.pathname}${q ? `?${q}` : ""}`, { replace: true, keepScroll: true });
  }

  const [focusEvent, setFocusEvent] = useState<string | undefined>(undefined);
  useEffect(() => {
    if (focusEvent) document.getElementById(`audit-event-${focusEvent}`)?.focus();
  }, [focusEvent]);

  async function load(f: Filters, after: string | null) {
    const request = ++latest.current;
    if (!after) {
      setEvents([]);
      setCursor(null);
    }
    setLoading(true);
    setError(undefined);
    try {
      const q = apiQuery(f);
      q.set("limit", "50");
      if (after) q.set("cursor", after);
      const page = await get<AuditEventPage>(`${base}/audit?${q}`);
      if (request !== latest.current) return;
      setEvents((old) => (after ? [...old, ...page.events] : page.events));
      setCursor(page.nextCursor);
      // "Load more" was clicked: the reader goes on at the first event it brought.
      if (after) setFocusEvent(page.events[0]?.id);
    } catch (e) {
      if (request === latest.current) setError(messageOf(e));
    } finally {
      if (request === latest.current) setLoading(false);
    }
  }

  useEffect(() => {
    void load(filters, null);
  }, [base, filters]);

  // A key from elsewhere (back, forward) becomes the field's text; the one applied from the
  // field does not, or the letters typed since would be lost.
  const keyApplied = useRef(filters.key);
  useEffect(() => {
    if (filters.key === keyApplied.current) return;
    keyApplied.current = filters.key;
    setKeyDraft(filters.key);
  }, [filters.key]);
  function applyKey(key: string) {
    keyApplied.current = key;
    apply({ ...filters, key });
  }

  const typedKey = keyDraft.trim();
  const isKeyValid = typedKey === "" || hasKeyShape(typedKey);
  useEffect(() => {
    if (!isKeyValid || typedKey === filters.key) return;
    const timer = setTimeout(() => applyKey(typedKey), KEY_PAUSE_MS);
    return () => clearTimeout(timer);
  }, [typedKey, filters]);

  const actions = filters.category ? CATEGORIES[filters.category]! : Object.values(CATEGORIES).flat();
  const people = (members.data ?? []).map((m) => (
    <option key={m.userId} value={m.userId}>
      {m.isYou ? `you (${m.email ?? m.userId})` : (m.email ?? m.userId)}
    </option>
  ));
  const serviceAccounts = accounts.data ?? [];
  // An actor the lists do not hold (a former member, a deleted service account, or a list that
  // could not be loaded) still filters the list, and the select says so rather than "Anyone".
  const isListed = (members.data ?? []).some((m) => m.userId === filters.actor) || serviceAccounts.some((a) => a.id === filters.actor);
  const unlistedActor = filters.actor !== "" && !members.loading && !accounts.loading && !isListed;
  const listsFailed = members.error !== undefined || accounts.error !== undefined;
  const set = (field: keyof Filters) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) =>
    apply({ ...filters, [field]: e.currentTarget.value });
  const exportQuery = apiQuery(filters);

  return (
    <div class="stack">
      <h2>Audit log</h2>
      <form
        class="card filters"
        aria-label="Filters"
        onSubmit={(e) => {
          // Every filter applies as it changes; Enter in the key field applies it without the pause.
          e.preventDefault();
          if (isKeyValid && typedKey !== filters.key) applyKey(typedKey);
        }}
      >
        <label class="field">
          <span>Category</span>
          <select value={filters.category} onChange={(e) => apply({ ...filters, category: e.currentTarget.value, action: "" })}>
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
          <select value={filters.action} onChange={set("action")}>
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
          <select value={filters.actor} onChange={set("actor")}>
            <option value="">Anyone</option>
            {unlistedActor && (
              <option value={filters.actor}>
                {listsFailed ? `the actor ${filters.actor}` : `no longer in the project (${filters.actor})`}
              </option>
            )}
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
        {listsFailed && (
          <ErrorText
            error={`The people and service accounts to choose from could not be loaded: ${messageOf(members.error ?? accounts.error)}`}
          >
            <button
              type="button"
              class="link"
              onClick={() =>
                void Promise.all([members.error !== undefined && members.reload(), accounts.error !== undefined && accounts.reload()])
              }
            >
              Try again
            </button>
          </ErrorText>
        )}
        <label class="field">
          <span>Environment</span>
          <select value={filters.environment} onChange={set("environment")}>
            <option value="">Any</option>
            {project.environments.map((env) => (
              <option key={env} value={env}>
                {env}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Secret key</span>
          <input
            class="mono"
            value={keyDraft}
            onInput={(e) => setKeyDraft(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            placeholder="API_KEY"
            aria-invalid={!isKeyValid}
            aria-describedby={isKeyValid ? undefined : "audit-key-hint"}
          />
        </label>
        <label class="field">
          <span>From</span>
          <input type="date" value={filters.from} onInput={set("from")} />
        </label>
        <label class="field">
          <span>To</span>
          <input type="date" value={filters.to} onInput={set("to")} />
        </label>
        <div class="actions">
          <button
            type="button"
            disabled={query === "" && keyDraft === ""}
            onClick={() => {
              keyApplied.current = "";
              setKeyDraft("");
              apply(EMPTY);
            }}
          >
            Clear filters
          </button>
        </div>
      </form>
      {!isKeyValid && (
        <p class="error small" id="audit-key-hint">
          A secret key is letters, digits and underscores, not starting with a digit, at most 128 characters.
        </p>
      )}
      <AuditDownloads url={`${base}/audit/export`} query={exportQuery} />
      <ErrorText error={error} />
      {events.length === 0 && !loading && !error && <p class="empty">No events match.</p>}
      {events.length > 0 && (
        <ol class="audit-list" aria-label="Audit events, newest first">
          {events.map((event) => (
            <li key={event.id} id={`audit-event-${event.id}`} tabIndex={event.id === focusEvent ? -1 : undefined}>
              <Time iso={event.at} seconds />
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
      {/* Kept while the next page loads (a new filter clears the cursor first): a button that vanished under the focus would drop it to the page's top. */}
      {cursor && (
        <button type="button" {...whileBusy(loading, () => void load(filters, cursor))}>
          {loading ? "Loading more…" : "Load more"}
        </button>
      )}
    </div>
  );
}

/**
 * The filtered log as a file. Fetched, then saved, rather than a plain download link: a
 * refusal (the limit of 10 a minute, dates the API refuses, a session that ended) is then
 * said on the page, where a link would only leave a failed download in the browser.
 */
function AuditDownloads({ url, query }: { url: string; query: URLSearchParams }) {
  const action = useAction();
  async function download(format: "csv" | "json") {
    await action.run(async () => {
      const res = await request("GET", `${url}?${new URLSearchParams([...query, ["format", format]])}`);
      const named = /filename="([^"]+)"/.exec(res.headers.get("content-disposition") ?? "")?.[1];
      saveFile(named ?? `audit-log.${format}`, await res.text(), format === "csv" ? "text/csv" : "application/json");
    });
  }
  return (
    <>
      <div class="audit-downloads">
        <button type="button" {...whileBusy(action.busy, () => void download("csv"))}>
          Download CSV
        </button>
        <button type="button" {...whileBusy(action.busy, () => void download("json"))}>
          Download JSON
        </button>
        <span class="muted small">The events matching these filters, newest 10,000 at most. Each download is recorded in this log.</span>
      </div>
      <ErrorText error={action.error} />
    </>
  );
}
