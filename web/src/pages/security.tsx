// The read-only security overview: findings first (banners by severity, each with what to
// do and where), then the project's status, then what the server can do. Fields the API
// document leaves open (the per-environment grant summary, the hosting details) are shown
// generically.
import type { ComponentChildren } from "preact";
import { get, type Project, projectPath, type SecurityOverview } from "../api.ts";
import { formatTime, Link, LoadState, useLoad } from "../ui.tsx";

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

type Finding = SecurityOverview["findings"][number];

const SEVERITY_LABEL: Record<Finding["severity"], string> = { critical: "Critical", warning: "Warning", info: "To review" };

/** The project page a finding points to, by its path segment. */
const PAGE_LABEL: Record<string, string> = {
  access: "Open Environment access",
  members: "Open Members",
  "service-accounts": "Open Service accounts",
  vercel: "Open the Vercel integration",
};

function Where({ projectId, where }: { projectId: string; where: Finding["where"] }) {
  if ("page" in where) {
    return <Link href={`/projects/${projectId}/${where.page}`}>{PAGE_LABEL[where.page] ?? "Open"}</Link>;
  }
  // Server settings are changed where the server runs, not here: the README says how.
  return <>How: see “{where.readme}” in the README.</>;
}

/** Findings first, most severe first, each as a banner with what to do and where. */
function Findings({ projectId, findings }: { projectId: string; findings: Finding[] }) {
  if (findings.length === 0) {
    return (
      <p class="finding finding-ok" role="status">
        No findings: nothing on this project or server calls for action.
      </p>
    );
  }
  return (
    <section aria-labelledby="sec-findings" class="stack">
      <h3 id="sec-findings">Findings</h3>
      <ul class="findings">
        {findings.map((f) => (
          <li key={f.code + f.message} class={`finding finding-${f.severity}`} data-code={f.code}>
            <strong class="finding-severity">{SEVERITY_LABEL[f.severity] ?? f.severity}</strong>
            <p>{f.message}</p>
            <p class="finding-where">
              <Where projectId={projectId} where={f.where} />
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}

type ServiceAccountCounts = SecurityOverview["access"]["serviceAccounts"];

/** A count that is a warning when above zero. */
function Count({ n }: { n: number }) {
  return n > 0 ? (
    <>
      {n} <span class="badge status-attention">warning</span>
    </>
  ) : (
    n
  );
}

const hasServiceAccountWarnings = (c: ServiceAccountCounts) => c.tokensWithoutExpiry > 0 || c.tokensUnusedFor90Days > 0;

export function SecurityPage({ project }: { project: Project }) {
  const overview = useLoad(() => get<SecurityOverview>(`${projectPath(project.id)}/security`), [project.id]);
  return (
    <div class="stack">
      <h2>Security overview</h2>
      <LoadState loaded={overview}>
        {(o) => {
          // Notes and findings say the same: the findings are shown.
          const {
            encryption: e,
            authentication: a,
            access,
            integrations,
            auditLog,
            notes: _notes,
            findings: _findings,
            environments,
            ...rest
          } = o;
          // Column by column from the rows themselves, so a field the server adds shows up too.
          const grants = environments.map((grant): Record<string, unknown> => ({ ...grant }));
          const { members, pendingInvitations, serviceAccounts: machines, ...accessMore } = access;
          return (
            <div class="stack">
              <Findings projectId={project.id} findings={o.findings} />
              <h3 class="sr-only">Status</h3>
              <div class="grid">
                <section class="card" aria-labelledby="sec-enc">
                  <h3 id="sec-enc">Encryption</h3>
                  <dl class="kv">
                    <Row label="Algorithm">{e.algorithm}</Row>
                    <Row label="Secrets encrypted at rest">{yesNo(e.secretsEncryptedAtRest)}</Row>
                    <Row label="Master key">
                      {e.keyConfigured ? (
                        "Set in MASTER_KEY"
                      ) : (
                        <>
                          Generated file in the data folder <span class="badge status-attention">warning</span>
                        </>
                      )}
                    </Row>
                    <Row label="Current key version">{e.currentKeyVersion}</Row>
                    <Row label="Encrypted records">
                      {e.records.total} total, {e.records.onCurrentKeyVersion} on the current key, {e.records.other} on older keys
                      {e.records.other > 0 && <span class="badge status-attention">warning</span>}
                    </Row>
                  </dl>
                </section>
                <section class="card" aria-labelledby="sec-auth">
                  <h3 id="sec-auth">Authentication</h3>
                  <dl class="kv">
                    <Row label="Identity provider">{a.provider}</Row>
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
                  {hasServiceAccountWarnings(machines) && project.permissions.includes("service_accounts:manage") && (
                    <p>
                      <Link href={`/projects/${project.id}/service-accounts`}>Review the service accounts</Link>
                    </p>
                  )}
                </section>
                <section class="card" aria-labelledby="sec-int">
                  <h3 id="sec-int">Integrations</h3>
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
                <section class="card" aria-labelledby="sec-caps">
                  <h3 id="sec-caps">What this server can do</h3>
                  <p class="muted small">Capabilities, not the state of this project.</p>
                  <dl class="kv">
                    <Row label="Key rotation">
                      {e.keyRotation ? (
                        <>
                          Supported: run <code>secrets-server rotate-key</code> after setting a new MASTER_KEY
                        </>
                      ) : (
                        "Not supported"
                      )}
                    </Row>
                    <Row label="External KMS">{e.externalKms ? "Supported" : "Not supported: the master key comes from MASTER_KEY"}</Row>
                    <Row label="CLI access tokens last">{a.cliAccessTokenMinutes} minutes</Row>
                    <Row label="CLI refresh tokens last">{a.cliRefreshTokenDays} days</Row>
                  </dl>
                </section>
              </div>
            </div>
          );
        }}
      </LoadState>
    </div>
  );
}
