// CLI sessions (list, revoke one or all) and the device approval page. Approval is always
// an explicit click: the page never approves on load.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, type CliSession, type DeviceApproval, del, get, type PendingDeviceRequest, post } from "../api.ts";
import {
  Confirm,
  DataTable,
  ErrorText,
  Link,
  LoadState,
  messageOf,
  OutcomeHeading,
  RowButton,
  SubmitButton,
  Time,
  useAction,
  useLoad,
  whileBusy,
} from "../ui.tsx";

export function CliSessionsPage() {
  const sessions = useLoad(() => get<{ sessions: CliSession[] }>("/api/cli/sessions").then((r) => r.sessions), []);
  const [revoking, setRevoking] = useState<CliSession | "all" | undefined>(undefined);
  const [status, setStatus] = useState("");
  return (
    <section class="stack">
      <div class="page-head">
        <h1>CLI sessions</h1>
        {sessions.data && sessions.data.length > 0 && (
          <button type="button" class="danger" onClick={() => setRevoking("all")}>
            Revoke all
          </button>
        )}
      </div>
      <p class="muted">
        Each time you sign in with the command-line tool, it gets a session here. Revoking one signs that device out at its next request.
      </p>
      <p class="status" role="status">
        {status}
      </p>
      <LoadState loaded={sessions}>
        {(list) =>
          list.length === 0 ? (
            <p class="empty">No active CLI sessions.</p>
          ) : (
            <DataTable columns={["Device", "Signed in", "Last used", "Expires"]} actions>
              {list.map((s) => (
                <tr key={s.id}>
                  <th scope="row">{s.deviceName || "unnamed device"}</th>
                  <td>
                    <Time iso={s.createdAt} />
                  </td>
                  <td>
                    <Time iso={s.lastUsedAt} />
                  </td>
                  <td>
                    <Time iso={s.expiresAt} />
                  </td>
                  <td class="row-actions">
                    <RowButton danger label={`Revoke ${s.deviceName || "this session"}`} onClick={() => setRevoking(s)}>
                      Revoke
                    </RowButton>
                  </td>
                </tr>
              ))}
            </DataTable>
          )
        }
      </LoadState>
      {revoking && (
        <Confirm
          title={revoking === "all" ? "Revoke every CLI session?" : `Revoke ${revoking.deviceName || "this session"}?`}
          confirmLabel={revoking === "all" ? "Revoke all" : "Revoke"}
          danger
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            // Gone already (a logout on that device, revoked in another tab): the list is
            // refreshed whatever the answer, so the row does not stay to be revoked again.
            try {
              if (revoking === "all") {
                const { revoked } = await del<{ revoked: number }>("/api/cli/sessions");
                setStatus(`${revoked} ${revoked === 1 ? "session" : "sessions"} revoked.`);
              } else {
                await del(`/api/cli/sessions/${revoking.id}`);
                setStatus("Session revoked.");
              }
            } finally {
              await sessions.reload();
            }
          }}
        >
          <p>The command-line tool on {revoking === "all" ? "every device" : "that device"} will have to sign in again.</p>
        </Confirm>
      )}
    </section>
  );
}

/** A user code as compared: upper case, letters and digits only. */
function normalized(raw: string): string {
  return raw.toUpperCase().replace(/[^A-Z0-9]/g, "");
}

function formatCode(raw: string): string {
  const clean = normalized(raw);
  return clean.length === 8 ? `${clean.slice(0, 4)}-${clean.slice(4)}` : raw.trim();
}

/** How often the approval page asks for the new session, and for how long. */
const SESSION_POLL_MS = 2500;
const SESSION_WAIT_SECONDS = 90;

/**
 * After an approval: the session exists only once the terminal has picked up its tokens (it
 * asks every few seconds), so until then this says so, then shows the new session.
 */
function ApprovedPage({ deviceName, knownIds, approvedAt }: { deviceName: string; knownIds: Set<string>; approvedAt: number }) {
  const [session, setSession] = useState<CliSession | undefined>(undefined);
  const [timedOut, setTimedOut] = useState(false);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    async function poll() {
      try {
        const { sessions } = await get<{ sessions: CliSession[] }>("/api/cli/sessions");
        if (stopped) return;
        const fresh = sessions.filter((s) => !knownIds.has(s.id));
        const found = fresh.find((s) => s.deviceName === deviceName) ?? fresh[0];
        if (found) {
          setSession(found);
          return;
        }
      } catch {
        // A failed look is not an answer: the next one may work, and the page says nothing false meanwhile.
        if (stopped) return;
      }
      // From the approval, not from when this mounted: a page rendered again keeps the deadline.
      if (Date.now() - approvedAt >= SESSION_WAIT_SECONDS * 1000) setTimedOut(true);
      else timer = setTimeout(() => void poll(), SESSION_POLL_MS);
    }
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  const name = `“${deviceName || "unnamed device"}”`;
  if (session) {
    return (
      <section class="narrow stack">
        <OutcomeHeading>CLI signed in</OutcomeHeading>
        <p role="status">{`${name} is now signed in as you. You can close this page and return to your terminal.`}</p>
        <dl class="card kv">
          <dt>Device</dt>
          <dd>{session.deviceName || "unnamed device"}</dd>
          <dt>Signed in</dt>
          <dd>
            <Time iso={session.createdAt} seconds />
          </dd>
          <dt>Session expires</dt>
          <dd>
            <Time iso={session.expiresAt} />
          </dd>
        </dl>
        <p>
          <Link href="/cli-sessions">See your CLI sessions</Link>
        </p>
      </section>
    );
  }
  return (
    <section class="narrow stack">
      <OutcomeHeading>Approved</OutcomeHeading>
      {timedOut ? (
        <p role="status">
          {`Your terminal has not picked up the approval in ${SESSION_WAIT_SECONDS} seconds. If it is still waiting, it will finish on its own and the session will be listed under your CLI sessions. If it was closed, no session was created and the approval lapses with the code.`}
        </p>
      ) : (
        <p role="status">{`Waiting for your terminal… ${name} is signed in as soon as it picks up the approval, within a few seconds.`}</p>
      )}
      <p>
        <Link href="/cli-sessions">See your CLI sessions</Link>
      </p>
    </section>
  );
}

export function CliAuthorizePage({ code: initial }: { code: string }) {
  const [code, setCode] = useState(formatCode(initial));
  const [done, setDone] = useState<{ approved: boolean; deviceName: string; knownIds: Set<string>; at: number } | undefined>(undefined);
  const [choice, setChoice] = useState<boolean | undefined>(undefined);
  const [pending, setPending] = useState<PendingDeviceRequest | undefined>(undefined);
  // The code the server gave a final answer for (invalid or expired): sending it again cannot help.
  const [refused, setRefused] = useState<string | undefined>(undefined);
  const action = useAction();
  // The lookup of the code asked about last; answers for earlier codes (they may arrive later) change nothing.
  const [lookup, setLookup] = useState<{ code: string; busy: boolean; error?: string } | undefined>(undefined);
  const looked = lookup?.code ?? "";
  const latestLookup = useRef("");

  // Only describes the request (device name, expiry); approving always takes a click.
  async function describe(raw: string) {
    const clean = normalized(raw);
    if (clean.length !== 8 || clean === looked) return;
    latestLookup.current = clean;
    setLookup({ code: clean, busy: true });
    setPending(undefined);
    try {
      const result = await post<{ request: PendingDeviceRequest }>("/api/cli/auth/pending", { userCode: raw.trim() });
      if (latestLookup.current !== clean) return;
      setLookup({ code: clean, busy: false });
      setPending(result.request);
    } catch (e) {
      if (latestLookup.current === clean) setLookup({ code: clean, busy: false, error: messageOf(e) });
    }
  }

  useEffect(() => {
    if (initial) void describe(initial);
  }, [initial]);

  async function answer(approve: boolean) {
    setChoice(approve);
    const sent = code.trim();
    const result = await action.run(async () => {
      // The sessions that exist already, so the one this approval creates can be told apart.
      const known = approve ? (await get<{ sessions: CliSession[] }>("/api/cli/sessions")).sessions.map((s) => s.id) : [];
      try {
        return { ...(await post<DeviceApproval>("/api/cli/auth/approve", { userCode: sent, approve })), known };
      } catch (error) {
        if (error instanceof ApiError && (error.status === 400 || error.status === 404)) setRefused(sent);
        throw error;
      }
    });
    if (result) setDone({ approved: result.approved, deviceName: result.deviceName, knownIds: new Set(result.known), at: Date.now() });
  }

  if (done?.approved) return <ApprovedPage deviceName={done.deviceName} knownIds={done.knownIds} approvedAt={done.at} />;
  if (done) {
    return (
      <section class="narrow stack">
        <OutcomeHeading>Sign-in denied</OutcomeHeading>
        <p role="status">{`The request from “${done.deviceName}” was denied. The terminal will say so.`}</p>
        <p>
          <Link href="/cli-sessions">See your CLI sessions</Link>
        </p>
      </section>
    );
  }

  const isRefused = refused !== undefined && refused === code.trim();
  return (
    <section class="narrow stack">
      <h1>Authorize the command-line tool</h1>
      <p>
        A terminal asked to sign in to this server as you. Approve only if you started <code>login</code> yourself just now and the code
        below matches the one in your terminal.
      </p>
      <form
        class="card stack"
        onSubmit={(e) => {
          e.preventDefault();
          if (!isRefused && !action.busy) void answer(true);
        }}
      >
        <label class="field">
          <span>Code shown in your terminal</span>
          <input
            class="code-input mono"
            required
            value={code}
            onInput={(e) => setCode(e.currentTarget.value)}
            onBlur={(e) => void describe(e.currentTarget.value)}
            autoComplete="off"
            spellcheck={false}
            placeholder="ABCD-EFGH"
          />
        </label>
        {/* Only for the code in the field (answers may arrive out of order): an edited code is another request. */}
        {/* The region stays in the page, empty until there is a device to name: one inserted with its text is often not announced. */}
        <div role="status">
          {pending && normalized(pending.userCode) === normalized(code) && (
            <p class="notice">
              Device: <strong>{pending.deviceName || "unnamed device"}</strong>. The request expires at <Time iso={pending.expiresAt} />.
            </p>
          )}
        </div>
        {lookup?.busy && lookup.code === normalized(code) && <p class="muted small">Looking up the request…</p>}
        <ErrorText error={lookup?.error && lookup.code === normalized(code) && !action.error ? lookup.error : undefined} />
        <p class="muted small">Nothing happens until you press Approve or Deny.</p>
        <ErrorText error={action.error} />
        {isRefused && <p class="muted small">Check the code against your terminal, or run login again there for a new one.</p>}
        <div class="actions">
          <SubmitButton label="Approve" busyLabel={choice === true ? "Approving…" : "Approve"} busy={action.busy} disabled={isRefused} />
          <button type="button" class="danger" disabled={isRefused} {...whileBusy(action.busy, () => void answer(false))}>
            {action.busy && choice === false ? "Denying…" : "Deny"}
          </button>
        </div>
      </form>
    </section>
  );
}
