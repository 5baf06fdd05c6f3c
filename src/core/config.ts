import type { AddressInfo } from "node:net";
import net from "node:net";
import path from "node:path";
import { envSchema } from "env-schema";
import { DEFAULT_IPV6_PREFIX } from "./client-address.ts";
import { isLoopbackHost } from "./loopback.ts";
import { foldEmail } from "./text.ts";

// Every variable of the README's "Configuration" section. The executable checks them with
// this schema compiled by the build (src/dev/env-schema-precompiled.ts), not at each start.
export const ENV_SCHEMA = {
  type: "object",
  required: [],
  properties: {
    NODE_ENV: { type: "string", enum: ["development", "production", "test"], default: "development" },
    HOST: { type: "string", minLength: 1, default: "127.0.0.1" },
    PORT: { type: "integer", minimum: 0, maximum: 65535, default: 8080 },
    APP_URL: { type: "string", minLength: 1 },
    DATA_DIR: { type: "string", minLength: 1, default: "./data" },
    MASTER_KEY: { type: "string", minLength: 1 },
    MASTER_KEY_VERSION: { type: "integer", minimum: 1, maximum: 1_000_000, default: 1 },
    MASTER_KEYS_PREVIOUS: { type: "string" },
    AUTH_PROVIDER: { type: "string", enum: ["dev", "oidc", "local"] },
    OIDC_ISSUER: { type: "string", minLength: 1 },
    OIDC_CLIENT_ID: { type: "string", minLength: 1 },
    OIDC_CLIENT_SECRET: { type: "string", minLength: 1 },
    OIDC_ALLOWED_DOMAINS: { type: "string" },
    VERCEL_API_URL: { type: "string", minLength: 1, default: "https://api.vercel.com" },
    LOG_LEVEL: {
      type: "string",
      enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"],
      default: "info",
    },
    SQLITE_SYNCHRONOUS: { type: "string", enum: ["full", "normal"], default: "full" },
    TRUST_PROXY: { type: "string" },
    DATABASE_URL: { type: "string" },
    DATABASE_POOL_SIZE: { type: "integer", minimum: 1, maximum: 1000, default: 10 },
    DATABASE_STATEMENT_TIMEOUT_SECONDS: { type: "integer", minimum: 1, maximum: 3600, default: 30 },
    DATABASE_CA_FILE: { type: "string", minLength: 1 },
    SMTP_URL: { type: "string", minLength: 1 },
    SMTP_FROM: { type: "string", minLength: 3 },
    RATE_LIMIT_PER_MINUTE: { type: "integer", minimum: 1, maximum: 1_000_000, default: 600 },
    RATE_LIMIT_IPV6_PREFIX: { type: "integer", minimum: 32, maximum: 128, default: DEFAULT_IPV6_PREFIX },
    SYNC_DEBOUNCE_MS: { type: "integer", minimum: 0, maximum: 600_000, default: 5000 },
    SYNC_LEASE_SECONDS: { type: "integer", minimum: 2, maximum: 600, default: 30 },
    SYNC_RETRY_MS: { type: "integer", minimum: 10, maximum: 3_600_000, default: 60_000 },
    VERCEL_RETRY_BASE_MS: { type: "integer", minimum: 0, maximum: 60_000, default: 500 },
    SHUTDOWN_DRAIN_SECONDS: { type: "integer", minimum: 0, maximum: 600, default: 10 },
    REQUEST_TIMEOUT_SECONDS: { type: "integer", minimum: 1, maximum: 3600, default: 60 },
    KEEP_ALIVE_TIMEOUT_SECONDS: { type: "integer", minimum: 1, maximum: 600, default: 5 },
    AUDIT_RETENTION_DAYS: { type: "integer", minimum: 1, maximum: 36_500 },
  },
} as const;

interface RawEnv {
  NODE_ENV: "development" | "production" | "test";
  HOST: string;
  PORT: number;
  APP_URL?: string;
  DATA_DIR: string;
  MASTER_KEY?: string;
  MASTER_KEY_VERSION: number;
  MASTER_KEYS_PREVIOUS?: string;
  AUTH_PROVIDER?: "dev" | "oidc" | "local";
  OIDC_ISSUER?: string;
  OIDC_CLIENT_ID?: string;
  OIDC_CLIENT_SECRET?: string;
  OIDC_ALLOWED_DOMAINS?: string;
  VERCEL_API_URL: string;
  LOG_LEVEL: string;
  SQLITE_SYNCHRONOUS: "full" | "normal";
  TRUST_PROXY?: string;
  DATABASE_URL?: string;
  DATABASE_POOL_SIZE: number;
  DATABASE_STATEMENT_TIMEOUT_SECONDS: number;
  DATABASE_CA_FILE?: string;
  SMTP_URL?: string;
  SMTP_FROM?: string;
  RATE_LIMIT_PER_MINUTE: number;
  RATE_LIMIT_IPV6_PREFIX: number;
  SYNC_DEBOUNCE_MS: number;
  SYNC_LEASE_SECONDS: number;
  SYNC_RETRY_MS: number;
  VERCEL_RETRY_BASE_MS: number;
  SHUTDOWN_DRAIN_SECONDS: number;
  REQUEST_TIMEOUT_SECONDS: number;
  KEEP_ALIVE_TIMEOUT_SECONDS: number;
  AUDIT_RETENTION_DAYS?: number;
}

export interface DatabaseConfig {
  url: string;
  poolSize: number;
  statementTimeoutMs: number;
  /** A CA certificate (PEM) the server's certificate must chain to. */
  caFile?: string;
}

export type AuthProvider = "dev" | "oidc" | "local";

export interface Config {
  isProduction: boolean;
  host: string;
  port: number;
  /** Public base URL without a trailing slash. */
  appUrl: string;
  appOrigin: string;
  /** PORT=0 with APP_URL unset or on port 0: the URL is known only once the OS has picked the port (see boundTo). */
  appUrlFollowsPort: boolean;
  dataDir: string;
  /** Base64 text as configured; decoded and checked by the keyring. */
  masterKey?: string;
  masterKeyVersion: number;
  previousMasterKeys: string;
  authProvider: AuthProvider;
  oidc?: { issuer: string; clientId: string; clientSecret: string; allowedDomains: string[] };
  vercelApiUrl: string;
  logLevel: string;
  sqliteSynchronous: "full" | "normal";
  /** PostgreSQL instead of SQLite in DATA_DIR (DATABASE_URL); never logged, it may hold a password. */
  database?: DatabaseConfig;
  /** false, a hop count, or proxy addresses; never `true`, which would trust any X-Forwarded-For. */
  trustProxy: false | number | string[];
  smtp?: { url: string; from: string };
  rateLimitPerMinute: number;
  /** How many leading bits of an IPv6 client address the per-address limits count by (64). */
  rateLimitIpv6Prefix: number;
  /** Delay between a secret change and the automatic Vercel sync it schedules. */
  syncDebounceMs: number;
  /** A Vercel sync or scheduler lease not renewed for this long belongs to a process that is gone. */
  syncLeaseSeconds: number;
  /** The wait before a failed sync's pending changes are tried again; doubles per failed retry. */
  syncRetryMs: number;
  /** First back-off step of Vercel retries; it doubles on each attempt. */
  vercelRetryBaseMs: number;
  /** After SIGTERM/SIGINT: how long open connections may finish before the process exits. */
  shutdownDrainSeconds: number;
  /** A request's headers and body must have arrived within this (a body shorter than its Content-Length ends here). */
  requestTimeoutSeconds: number;
  /** An idle keep-alive connection is closed after this; announced in the Keep-Alive header. */
  keepAliveTimeoutSeconds: number;
  /** Audit events older than this many days are pruned; undefined keeps them forever. */
  auditRetentionDays?: number;
}

/** A configuration problem: the process prints the message as one line and exits. */
export class ConfigError extends Error {}

/** Whether `url` names a PostgreSQL database (postgres:// or postgresql://). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** DATA_DIR that cannot hold our files (a file in the way, no permission): one line naming the variable. */
export function unusableDataDir(dataDir: string, error: unknown): ConfigError {
  return new ConfigError(`DATA_DIR ${dataDir} cannot be used: ${(error as NodeJS.ErrnoException).code ?? String(error)}.`);
}

/** DATABASE_URL, checked before anything is opened. The URL itself is never repeated (it may hold a password). */
function parseDatabase(raw: RawEnv): DatabaseConfig | undefined {
  const url = raw.DATABASE_URL;
  if (url === undefined) return undefined;
  if (!isPostgresUrl(url)) throw new ConfigError("DATABASE_URL must start with postgres:// or postgresql://.");
  return {
    url,
    poolSize: raw.DATABASE_POOL_SIZE,
    statementTimeoutMs: raw.DATABASE_STATEMENT_TIMEOUT_SECONDS * 1000,
    caFile: raw.DATABASE_CA_FILE === undefined ? undefined : path.resolve(raw.DATABASE_CA_FILE),
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let raw: RawEnv;
  try {
    // Unset and empty are the same thing for an operator editing an EnvironmentFile.
    const data = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
    // env: false, or env-schema merges process.env back over `data` (undoing the filter).
    raw = envSchema<RawEnv>({ schema: ENV_SCHEMA, data, env: false, dotenv: false });
  } catch (error) {
    throw new ConfigError(describeSchemaError(error));
  }

  const database = parseDatabase(raw);
  if (database && !raw.MASTER_KEY) {
    // A key generated into each server's DATA_DIR would differ from server to server.
    throw new ConfigError("MASTER_KEY is required with DATABASE_URL: give every server the same key (openssl rand -base64 32 makes one).");
  }
  const isProduction = raw.NODE_ENV === "production";
  const appUrl = parseAppUrl(raw.APP_URL ?? `http://localhost:${raw.PORT}`, isProduction);
  const vercelApiUrl = parseHttpUrl("VERCEL_API_URL", raw.VERCEL_API_URL).replace(/\/+$/, "");

  const authProvider = raw.AUTH_PROVIDER ?? (isProduction ? undefined : "dev");
  if (!authProvider) {
    throw new ConfigError("AUTH_PROVIDER is required in production: set it to oidc or local.");
  }
  if (authProvider === "dev" && isProduction) {
    throw new ConfigError("AUTH_PROVIDER=dev is not allowed in production: set it to oidc or local.");
  }
  if (isProduction && !raw.MASTER_KEY) {
    throw new ConfigError("MASTER_KEY is required in production: base64 of 32 random bytes (openssl rand -base64 32).");
  }

  let oidc: Config["oidc"];
  if (authProvider === "oidc") {
    for (const name of ["OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET"] as const) {
      if (!raw[name]) throw new ConfigError(`${name} is required when AUTH_PROVIDER=oidc.`);
    }
    oidc = {
      issuer: parseHttpUrl("OIDC_ISSUER", raw.OIDC_ISSUER!),
      clientId: raw.OIDC_CLIENT_ID!,
      clientSecret: raw.OIDC_CLIENT_SECRET!,
      allowedDomains: (raw.OIDC_ALLOWED_DOMAINS ?? "")
        .split(",")
        // Folded as the addresses they are compared with (foldEmail): a domain's other
        // letters are compared as written, or a look-alike domain would pass.
        .map(foldEmail)
        .filter(Boolean),
    };
  }

  let smtp: Config["smtp"];
  if (raw.SMTP_URL) {
    if (!/^smtps?:\/\//.test(raw.SMTP_URL)) {
      throw new ConfigError("SMTP_URL must start with smtp:// or smtps://.");
    }
    smtp = { url: raw.SMTP_URL, from: raw.SMTP_FROM ?? `secrets-server <no-reply@${new URL(appUrl).hostname}>` };
  }

  return {
    isProduction,
    host: raw.HOST,
    port: raw.PORT,
    appUrl,
    appOrigin: new URL(appUrl).origin,
    appUrlFollowsPort: raw.PORT === 0 && new URL(appUrl).port === "0",
    dataDir: path.resolve(raw.DATA_DIR),
    masterKey: raw.MASTER_KEY,
    masterKeyVersion: raw.MASTER_KEY_VERSION,
    previousMasterKeys: raw.MASTER_KEYS_PREVIOUS ?? "",
    authProvider,
    oidc,
    vercelApiUrl,
    logLevel: raw.LOG_LEVEL,
    sqliteSynchronous: raw.SQLITE_SYNCHRONOUS,
    database,
    trustProxy: parseTrustProxy(raw.TRUST_PROXY),
    smtp,
    rateLimitPerMinute: raw.RATE_LIMIT_PER_MINUTE,
    rateLimitIpv6Prefix: raw.RATE_LIMIT_IPV6_PREFIX,
    syncDebounceMs: raw.SYNC_DEBOUNCE_MS,
    syncLeaseSeconds: raw.SYNC_LEASE_SECONDS,
    syncRetryMs: raw.SYNC_RETRY_MS,
    vercelRetryBaseMs: raw.VERCEL_RETRY_BASE_MS,
    shutdownDrainSeconds: raw.SHUTDOWN_DRAIN_SECONDS,
    requestTimeoutSeconds: raw.REQUEST_TIMEOUT_SECONDS,
    keepAliveTimeoutSeconds: raw.KEEP_ALIVE_TIMEOUT_SECONDS,
    auditRetentionDays: raw.AUDIT_RETENTION_DAYS,
  };
}

function parseHttpUrl(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be an absolute http(s) URL, for example https://example.com.`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(`${name} must be an absolute http(s) URL, for example https://example.com.`);
  }
  return value;
}

function parseAppUrl(value: string, isProduction: boolean): string {
  const url = new URL(parseHttpUrl("APP_URL", value));
  // Session cookies are Secure in production, so plain http only works on loopback.
  if (isProduction && url.protocol !== "https:" && !isLoopbackHost(url.hostname)) {
    throw new ConfigError("APP_URL must use https in production (plain http is allowed only for localhost).");
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}

const PROXY_RANGE_NAMES = new Set(["loopback", "linklocal", "uniquelocal"]);

/** An address Fastify's proxy-addr takes: an IP, IP/prefix, or one of its range names. */
function isProxyAddress(entry: string): boolean {
  if (PROXY_RANGE_NAMES.has(entry)) return true;
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 4 ? 32 : 128));
}

/** More proxies than this in front of one server is no real set-up, only a way to spell `true`. */
const TRUST_PROXY_MAX_HOPS = 10;
const TRUST_PROXY_FORMS = `the number of proxies in front of the server (a hop count from 1 to ${TRUST_PROXY_MAX_HOPS}) or a comma-separated list of their addresses (IP, IP/prefix, loopback, linklocal, uniquelocal)`;

function parseTrustProxy(raw: string | undefined): Config["trustProxy"] {
  const value = raw?.trim();
  if (value === undefined || value === "false") return false;
  // `true` would take the left-most X-Forwarded-For entry, which the client writes itself:
  // anyone could pick their address and so escape every per-address limit.
  if (/^(true|yes|on|\*)$/i.test(value) || (/^\d+$/.test(value) && Number(value) > TRUST_PROXY_MAX_HOPS)) {
    throw new ConfigError(
      `TRUST_PROXY=${value} would let any client choose its address through X-Forwarded-For: set it to ${TRUST_PROXY_FORMS}.`,
    );
  }
  if (/^\d+$/.test(value)) {
    // 0 proxies trusts nothing, as leaving it unset does: say so rather than accept it silently.
    if (Number(value) === 0) throw new ConfigError(`TRUST_PROXY must be ${TRUST_PROXY_FORMS}; leave it unset when no proxy is in front.`);
    return Number(value);
  }
  const list = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  // Checked here: Fastify would otherwise stop the start with a stack trace.
  const wrong = list.find((entry) => !isProxyAddress(entry));
  if (list.length === 0 || wrong !== undefined) {
    throw new ConfigError(`TRUST_PROXY must be ${TRUST_PROXY_FORMS}${wrong === undefined ? "" : `; "${wrong}" is none of these`}.`);
  }
  return list;
}

function describeSchemaError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // ajv's "must be equal to one of the allowed values" does not say which: name them.
  type AjvIssue = { instancePath?: string; keyword?: string; params?: { allowedValues?: unknown[] } };
  const issue = (error as { errors?: AjvIssue[] } | null)?.errors?.[0];
  if (issue?.keyword === "enum" && issue.instancePath && Array.isArray(issue.params?.allowedValues)) {
    return `${issue.instancePath.slice(1)} must be one of: ${issue.params.allowedValues.join(", ")}.`;
  }
  // ajv says "env/PORT must be <= 65535" or "env must have required property 'X'".
  const first = message.split(/,\s*(?=env)/)[0] ?? message;
  const named = first.match(/^env\/(\w+) (.*)$/);
  if (named) return `${named[1]} ${named[2]}.`;
  const required = first.match(/required property '(\w+)'/);
  if (required) return `${required[1]} is required.`;
  return `Invalid configuration: ${first}`;
}

/**
 * Records the port the server actually listens on. With PORT=0 the OS picks a free one,
 * which is how tests and scripts start servers side by side without racing for a port;
 * an APP_URL left unset then names that port, as it names PORT otherwise.
 */
export function boundTo(config: Config, address: AddressInfo | string | null): void {
  if (!address || typeof address === "string") return;
  const port = address.port;
  config.port = port;
  if (!config.appUrlFollowsPort) return;
  const url = new URL(config.appUrl);
  url.port = String(port);
  config.appUrl = url.origin;
  config.appOrigin = url.origin;
}
