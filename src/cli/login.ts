import os from "node:os";
import { printable } from "../core/text.ts";
import { apiBody, errorFor, isExpired, post, refreshCredentials, tokensFrom } from "./api.ts";
import { maybeOpenBrowser } from "./browser.ts";
import { CONNECTION_OPTIONS, connect, JSON_OPTION, parseFlags, resolveServer, SERVER_OPTION } from "./context.ts";
import { forgetServer, readCredentials, type ServerCredentials, withCredentialsLock, writeCredentials } from "./credentials.ts";
import { CliError, EXIT, UnreachableError } from "./errors.ts";
import { hasFallbacks, removeFallbacks } from "./fallback.ts";

const LOGIN_USAGE = `Usage: secrets-server login [--server URL] [--device-name NAME] [--no-browser] [--json]

Signs this machine in with the device flow: open the printed URL in a browser where you
are signed in, check that the code matches, and approve.`;

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Opens the browser only on a desktop session with a terminal; a headless machine gets nothing opened. */
function webPage(input: unknown): URL | undefined {
  try {
    const url = new URL(String(input));
    return url.protocol === "https:" || url.protocol === "http:" ? url : undefined;
  } catch {
    return undefined;
  }
}

class Spinner {
  private timer?: NodeJS.Timeout;
  private frame = 0;
  private readonly text: string;

  constructor(text: string) {
    this.text = text;
  }
  start(): void {
    if (!process.stderr.isTTY) return;
    this.timer = setInterval(() => {
      process.stderr.write(`\r${SPINNER[this.frame++ % SPINNER.length]} ${this.text}`);
    }, 100);
  }
  stop(): void {
    if (!this.timer) return;
    clearInterval(this.timer);
    process.stderr.write("\r\x1b[K");
  }
}

function defaultDeviceName(): string {
  try {
    return `${os.userInfo().username}@${os.hostname()}`;
  } catch {
    // No passwd entry (some containers): the host name alone still tells devices apart.
    return os.hostname();
  }
}

export async function login(args: string[]): Promise<number> {
  const { values } = parseFlags(
    args,
    { ...SERVER_OPTION, ...JSON_OPTION, "device-name": { type: "string" }, "no-browser": { type: "boolean", default: false } },
    LOGIN_USAGE,
  );
  // Never from a link file: see resolveServer.
  const server = resolveServer(values.server, { link: undefined });
  const deviceName = values["device-name"] ?? defaultDeviceName();
  // Before the device flow: a damaged or unreadable file fails now, not once the approval
  // is used up and its session could be neither saved nor signed out.
  readCredentials();

  const start = await post(server, "/api/cli/auth/device", { deviceName });
  if (start.status !== 200) throw errorFor(start, server);
  const { deviceCode, userCode, verificationUrl, expiresIn, interval } = apiBody(start, server, "/api/cli/auth/device") as {
    deviceCode: string;
    userCode: string;
    verificationUrl: string;
    expiresIn: number;
    interval: number;
  };
  // A poll with no interval or deadline would ask without pause, and forever.
  if (typeof deviceCode !== "string" || typeof userCode !== "string" || !Number.isFinite(interval) || !Number.isFinite(expiresIn)) {
    throw new CliError(
      `${server} answered /api/cli/auth/device without what the API sends (a device code, its interval and lifetime): is ${server} the secrets server's address?`,
      EXIT.failed,
    );
  }

  // What the server sent is shown, never obeyed: printable text, and a page opened only
  // when it is a web address.
  const page = webPage(verificationUrl);
  process.stderr.write(
    `To sign in, open this page in a browser where you are signed in to ${server}:\n\n  ${printable(String(verificationUrl))}\n\n` +
      `and check that it shows this code before you approve:\n\n  ${printable(String(userCode))}\n\n`,
  );
  if (page && page.origin !== new URL(server).origin) {
    process.stderr.write(
      `Note: that page is on ${page.origin}, not on ${server}. Approve only if that is your secrets server's address.\n\n`,
    );
  }
  if (page && !values["no-browser"]) maybeOpenBrowser(page.href);

  const spinner = new Spinner("Waiting for approval in the browser…");
  spinner.start();
  let credentials: ServerCredentials;
  try {
    credentials = await pollForTokens(server, deviceCode, interval, expiresIn);
  } finally {
    spinner.stop();
  }

  let previous: ServerCredentials | undefined;
  try {
    previous = await withCredentialsLock(async () => {
      const data = readCredentials();
      const old = data.servers[server];
      data.servers[server] = credentials;
      data.defaultServer = server;
      writeCredentials(data);
      return old;
    });
  } catch (error) {
    // Not saved (a folder that refuses the file): the session just made would stay live for
    // 30 days with nobody holding it, so it ends here.
    const ended = await post(server, "/api/cli/auth/logout", undefined, credentials.accessToken).then(
      (res) => res.status === 200,
      () => false,
    );
    if (!ended) process.stderr.write(`Warning: the new session could not be ended: revoke it on ${server}/cli-sessions.\n`);
    throw error;
  }
  // A second login on the same machine replaces the first; end the old session rather than leave it live.
  if (previous && previous.accessToken !== credentials.accessToken) await endReplacedSession(server, previous).catch(() => undefined);

  if (values.json) process.stdout.write(`${JSON.stringify({ server, email: credentials.email })}\n`);
  else process.stdout.write(`Signed in to ${server} as ${printable(credentials.email)}.\n`);
  if (process.env.SECRETS_SERVER_TOKEN || process.env.SECRETS_SERVER_SERVICE_ACCOUNT) {
    process.stderr.write(
      `Note: ${process.env.SECRETS_SERVER_TOKEN ? "SECRETS_SERVER_TOKEN" : "SECRETS_SERVER_SERVICE_ACCOUNT"} is set, so other commands use the service account, not this login, until it is unset.\n`,
    );
  }
  return EXIT.ok;
}

/**
 * Ends a session this machine no longer uses. Its access token may have expired (an hour),
 * and a logout with an expired one ends nothing: the refresh token gets a fresh one first.
 * Refused (the session ended already): nothing left to end. Any other failure (a 429, a
 * network error): the old access token is the best left to try.
 */
async function endReplacedSession(server: string, old: ServerCredentials): Promise<void> {
  const refreshed = await post(server, "/api/cli/auth/refresh", { refreshToken: old.refreshToken }).catch(() => undefined);
  if (refreshed?.status === 401) return;
  const accessToken = refreshed?.status === 200 ? refreshed.body.accessToken : old.accessToken;
  await post(server, "/api/cli/auth/logout", undefined, accessToken);
}

async function pollForTokens(server: string, deviceCode: string, intervalSeconds: number, expiresInSeconds: number) {
  let waitMs = Math.max(1, intervalSeconds) * 1000;
  const deadline = Date.now() + expiresInSeconds * 1000;
  // A poll whose answer was lost may have been the one that took the tokens.
  let lostAnswer = false;
  for (;;) {
    await sleep(waitMs);
    let res: Awaited<ReturnType<typeof post>>;
    try {
      res = await post(server, "/api/cli/auth/token", { deviceCode });
    } catch (error) {
      // A blip (the server restarting, a proxy's 502) while someone approves in the browser:
      // the request is kept on the server, so it is asked again until it expires.
      if (error instanceof UnreachableError && Date.now() < deadline) {
        lostAnswer = true;
        continue;
      }
      throw error;
    }
    if (res.status === 200) return tokensFrom(res, server, "/api/cli/auth/token");
    if (res.status === 202) {
      if (Date.now() > deadline) break;
      continue;
    }
    if (res.status === 429) {
      // Too fast for the server: slow down rather than give up.
      if (Date.now() > deadline) break;
      waitMs += 1000;
      continue;
    }
    if (res.status === 400 && res.body?.status === "denied") {
      throw new CliError("The login was denied in the browser. Nothing was saved.", EXIT.auth);
    }
    if (res.status === 400 && res.body?.status === "expired") break;
    throw errorFor(res, server);
  }
  const lost = lostAnswer
    ? ` A poll failed on the way: if you approved it, its session may have been made; revoke it on ${server}/cli-sessions.`
    : "";
  throw new CliError(`The login code expired before it was approved.${lost} Run "secrets-server login" again.`, EXIT.auth);
}

const LOGOUT_USAGE = `Usage: secrets-server logout [--server URL]

Ends this machine's CLI session on the server and deletes its credentials and fallback copies.`;

export async function logout(args: string[]): Promise<number> {
  const { values } = parseFlags(args, { ...SERVER_OPTION, ...JSON_OPTION }, LOGOUT_USAGE);
  const server = resolveServer(values.server, undefined, true);
  const stored = readCredentials().servers[server];
  let warning: string | undefined;
  if (stored) {
    try {
      // An expired access token would make logout a no-op on the server: refresh first.
      const fresh = isExpired(stored) ? await refreshCredentials(server, stored.accessToken) : stored;
      const res = await post(server, "/api/cli/auth/logout", undefined, fresh.accessToken);
      if (res.status !== 200) warning = `the server answered ${res.status}`;
    } catch (error) {
      // A session that already ended is what logout wants; only "unreachable" deserves a word.
      if (!(error instanceof CliError && error.exitCode === EXIT.auth)) warning = (error as Error).message;
    }
  }
  // Nothing to delete (never signed in, a read-only HOME): nothing is created either.
  if (stored || hasFallbacks(server)) {
    await withCredentialsLock(async () => {
      const data = readCredentials();
      // defaultServer stays: a later `login` goes back to the same server.
      if (data.servers[server]) {
        forgetServer(data, server);
        writeCredentials(data);
      }
      // Also when the credentials are already gone (a revoked session is forgotten by the
      // command that found out): the copies would otherwise stay, with their key beside them.
      removeFallbacks(server);
    });
  }
  if (warning) {
    process.stderr.write(
      `Warning: could not end the session on the server (${warning}). It stays valid until it expires; revoke it under CLI sessions in the browser.\n`,
    );
  }
  if (values.json) process.stdout.write(`${JSON.stringify({ server, signedOut: Boolean(stored) })}\n`);
  else process.stdout.write(stored ? `Signed out of ${server}.\n` : `Not signed in to ${server}.\n`);
  return EXIT.ok;
}

const WHOAMI_USAGE = `Usage: secrets-server whoami [--server URL] [--token-file FILE] [--json]

Shows the person signed in, or with a service token or an identity token the service
account: its project, role, environments and when the token expires.`;

export async function whoami(args: string[]): Promise<number> {
  const { values } = parseFlags(args, { ...CONNECTION_OPTIONS, ...JSON_OPTION }, WHOAMI_USAGE);
  const { api, server, machine } = connect(values);
  if (machine) {
    const { serviceAccount: account, expiresAt } = await machine.me((method, path) => api.request(method, path), server);
    const via = machine.kind;
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ server, via, serviceAccount: account, expiresAt })}\n`);
    } else {
      const expiry = `${via === "workload" ? "access token" : "token"} expires ${expiresAt ?? "never"}`;
      process.stdout.write(
        printable(`service account ${account.name} (${account.id}) on ${server}`) +
          "\n" +
          printable(
            `  project ${account.projectName} (${account.projectId}), role ${account.role}, environments ${account.environments.join(", ") || "none"}`,
          ) +
          `\n  ${printable(expiry)}\n`,
      );
    }
    return EXIT.ok;
  }
  const { user } = await api.expect<{ user: { id: string; email: string; name: string | null } }>(200, "GET", "/api/auth/me");
  if (values.json) process.stdout.write(`${JSON.stringify({ server, ...user })}\n`);
  else process.stdout.write(`${printable(`${user.email}${user.name ? ` (${user.name})` : ""}`)} on ${server}\n`);
  return EXIT.ok;
}
