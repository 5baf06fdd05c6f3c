// The read-only security overview. Fields the API document leaves open (notes, the
// per-environment grant summary, the hosting details) are shown generically.
import type { ComponentChildren } from "preact";
import { get, projectPath, type Project, type SecurityOverview } from "../api.ts";
import { Link, LoadState, formatTime, useLoad } from "../ui.tsx";

const yesNo = (value: boolean) => (value ? "Yes" : "No");

function Row({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </>
  );
}

/** Renders a value of unknown shape as readable text. */
function Value({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <span class="muted">—</span>;
  if (typeof value === "boolean") return <>{yesNo(value)}</>;
  if (typeof value === "string" && /^\d{4}-\d\d-\d\dT/.test(value)) return <>{formatTime(value)}</>;
  if (typeof value !== "object") return <>{String(value)}</>;
  if (Array.isArray(value)) {
    return (
      <ul class="plain">
        {value.map((v, i) => (
          <li key={i}>
            <Value value={v} />
          </li>
        ))}
      </ul>
    );
  }
  return (
    <dl class="kv nested">
      {Object.entries(value as Record<string, unknown>).map(([k, v]) => (
        <Row key={k} label={humanize(k)}>
          <Value value={v} />
        </Row>
      ))}
    </dl>
  );
}

function humanize(key: string): string {
  const words = key.replace(/([a-z])([A-Z])/g, "$1 $2").replace(/[_-]/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1).toLowerCase();
}

interface Note {
  text: string;
  ok?: boolean;
}

function toNotes(raw: unknown): Note[] {
  if (!Array.isArray(raw)) return typeof raw === "string" ? [{ text: raw }] : [];
  return raw.map((item) => {
    if (typeof item === "string") return { text: item };
    const o = (item ?? {}) as Record<string, unknown>;
    const text = [o.title, o.text, o.message, o.note, o.detail].find((x) => typeof x === "string") as string | undefined;
    const flag = [o.ok, o.done, o.passed, o.met, o.checked].find((x) => typeof x === "boolean") as boolean | undefined;
    const status = typeof o.status === "string" ? o.status : undefined;
    return { text: text ?? JSON.stringify(o), ok: flag ?? (status ? ["ok", "pass", "done", "good"].includes(status) : undefined) };
  });
}

type ServiceAccountCounts = SecurityOverview["access"]["serviceAccounts"];

/** A count that is a warning when above zero. */
function Count({ n }: { n: number }) {
  return n > 0 ? (
    <>
      {n} <span class="badge status-attention">warning</span>
    </>
  ) : (
    <>{n}</>
  );
}

function serviceAccountWarnings(c: ServiceAccountCounts): string[] {
  const warnings: string[] = [];
  if (c.tokensWithoutExpiry > 0) {
    warnings.push(
      `${c.tokensWithoutExpiry} service ${c.tokensWithoutExpiry === 1 ? "token never expires" : "tokens never expire"}: a leaked one works until someone revokes it. Replace ${c.tokensWithoutExpiry === 1 ? "it" : "them"} with tokens that expire, or with a trust.`,
    );
  }
  if (c.tokensUnusedFor90Days > 0) {
    warnings.push(
      `${c.tokensUnusedFor90Days} service ${c.tokensUnusedFor90Days === 1 ? "token has" : "tokens have"} not been used for 90 days. Revoke ${c.tokensUnusedFor90Days === 1 ? "it" : "them"} if nothing needs ${c.tokensUnusedFor90Days === 1 ? "it" : "them"}.`,
    );
  }
  return warnings;
}

export function SecurityPage({ project }: { project: Project }) {
  const overview = useLoad(() => get<SecurityOverview>(`${projectPath(project.id)}/security`), [project.id]);
  return (
    <div class="stack">
      <h2>Security overview</h2>
      <LoadState loaded={overview}>
        {(o) => {
          const { encryption: e, authentication: a, access, integrations, auditLog, notes, environments, ...rest } = o;
          // Column by column from the rows themselves, so a field the server adds shows up too.
          const grants = environments.map((grant): Record<string, unknown> => ({ ...grant }));
          const { members, pendingInvitations, serviceAccounts: machines, ...accessMore } = access;
          const warnings = serviceAccountWarnings(machines);
          return (
            <div class="grid">
              <section class="card" aria-labelledby="sec-enc">
                <h3 id="sec-enc">Encryption</h3>
                <dl class="kv">
                  <Row label="Algorithm">{e.algorithm}</Row>
                  <Row label="Secrets encrypted at rest">{yesNo(e.secretsEncryptedAtRest)}</Row>
                  <Row label="Master key configured">{yesNo(e.keyConfigured)}</Row>
                  <Row label="Current key version">{e.currentKeyVersion}</Row>
                  <Row label="Encrypted records">
                    {e.records.total} total, {e.records.onCurrentKeyVersion} on the current key, {e.records.other} on older keys
                  </Row>
                  <Row label="Key rotation">{yesNo(e.keyRotation)}</Row>
                  <Row label="External KMS">{yesNo(e.externalKms)}</Row>
                </dl>
              </section>
              <section class="card" aria-labelledby="sec-auth">
                <h3 id="sec-auth">Authentication</h3>
                <dl class="kv">
                  <Row label="Identity provider">{a.provider}</Row>
                  <Row label="CLI access tokens last">{a.cliAccessTokenMinutes} minutes</Row>
                  <Row label="CLI refresh tokens last">{a.cliRefreshTokenDays} days</Row>
                </dl>
              </section>
              <section class="card" aria-labelledby="sec-access">
                <h3 id="sec-access">Access</h3>
                <dl class="kv">
                  {Object.entries(members).map(([role, n]) => (
                    <Row key={role} label={`${humanize(role)}s`}>
                      {n}
                    </Row>
                  ))}
                  <Row label="Pending invitations">{pendingInvitations}</Row>
                  <Row label="Service accounts">{machines.accounts}</Row>
                  <Row label="Service tokens">{machines.tokens}</Row>
                  <Row label="Tokens without expiry">
                    <Count n={machines.tokensWithoutExpiry} />
                  </Row>
                  <Row label="Tokens unused for 90 days">
                    <Count n={machines.tokensUnusedFor90Days} />
                  </Row>
                  <Row label="Workload identity trusts">{machines.trusts}</Row>
                  {Object.entries(accessMore).map(([k, v]) => (
                    <Row key={k} label={humanize(k)}>
                      <Value value={v} />
                    </Row>
                  ))}
                </dl>
                {warnings.length > 0 && (
                  <div class="notice">
                    {warnings.map((w) => (
                      <p key={w}>{w}</p>
                    ))}
                    {project.permissions.includes("service_accounts:manage") && (
                      <p>
                        <Link href={`/projects/${project.id}/service-accounts`}>Review the service accounts</Link>
                      </p>
                    )}
                  </div>
                )}
              </section>
              <section class="card" aria-labelledby="sec-int">
                <h3 id="sec-int">Integrations</h3>
                {integrations.hosting?.paused && (
                  <p class="notice" role="alert">
                    Vercel syncing is paused: {integrations.hosting.connectedBy?.email ?? "the person who connected it"} no longer manages this project's
                    integrations. Reconnect Vercel with an admin's own token, or disconnect it.
                  </p>
                )}
                <dl class="kv">
                  <Row label="Vercel">{integrations.hosting ? <Value value={integrations.hosting} /> : "Not connected"}</Row>
                </dl>
              </section>
              <section class="card" aria-labelledby="sec-audit">
                <h3 id="sec-audit">Audit log</h3>
                <dl class="kv">
                  <Row label="Recorded events">{auditLog.events}</Row>
                </dl>
              </section>
              {grants.length > 0 && (
                <section class="card" aria-labelledby="sec-grants">
                  <h3 id="sec-grants">Environment grants</h3>
                  <table>
                    <thead>
                      <tr>
                        {Object.keys(grants[0]!).map((k) => (
                          <th scope="col" key={k}>
                            {humanize(k)}
                          </th>
                        ))}
                      </tr>
                    </thead>
                    <tbody>
                      {grants.map((g, i) => (
                        <tr key={i}>
                          {Object.keys(grants[0]!).map((k) => (
                            <td key={k}>
                              <Value value={g[k]} />
                            </td>
                          ))}
                        </tr>
                      ))}
                    </tbody>
                  </table>
                  <p class="muted small">Members and viewers holding a grant; owners and admins reach every environment.</p>
                </section>
              )}
              {Object.keys(rest).length > 0 && (
                <section class="card" aria-labelledby="sec-more">
                  <h3 id="sec-more">More</h3>
                  <Value value={rest} />
                </section>
              )}
              {toNotes(notes).length > 0 && (
                <section class="card wide-card" aria-labelledby="sec-notes">
                  <h3 id="sec-notes">Checklist</h3>
                  <ul class="checklist">
                    {toNotes(notes).map((n, i) => (
                      <li key={i} class={n.ok === true ? "ok" : n.ok === false ? "todo" : undefined}>
                        <span aria-hidden="true">{n.ok === true ? "✓" : n.ok === false ? "!" : "•"}</span>
                        <span>
                          {n.ok === true && <span class="sr-only">Done: </span>}
                          {n.ok === false && <span class="sr-only">To do: </span>}
                          {n.text}
                        </span>
                      </li>
                    ))}
                  </ul>
                </section>
              )}
            </div>
          );
        }}
      </LoadState>
    </div>
  );
}
