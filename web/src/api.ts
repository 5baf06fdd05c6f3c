// The one way the UI talks to the server: JSON over fetch, same origin, session cookie.
// Errors carry the API's own message so every action can show it as is.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();

/** Called when any request answers 401 `not signed in`: the app shows the sign-in page. */
export function onSignedOut(listener: Listener): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

export async function request(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch {
    throw new ApiError(0, "Could not reach the server. Check your connection and try again.");
  }
  if (!res.ok) {
    let parsed: unknown;
    let message = `The server answered ${res.status}.`;
    try {
      parsed = await res.json();
      const error = (parsed as { error?: unknown }).error;
      if (typeof error === "string" && error) message = error;
    } catch {
      // Not JSON: keep the generic message.
    }
    if (res.status === 401 && !path.startsWith("/api/auth/")) {
      for (const listener of signedOutListeners) listener();
    }
    throw new ApiError(res.status, message, parsed);
  }
  return res;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await request(method, path, body);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T,>(path: string) => api<T>("GET", path);
export const post = <T,>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const put = <T,>(path: string, body?: unknown) => api<T>("PUT", path, body);
export const patch = <T,>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const del = <T,>(path: string) => api<T>("DELETE", path);

export const ENVIRONMENTS = ["development", "staging", "production"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
export const ROLES = ["owner", "admin", "member", "viewer"] as const;
export type Role = (typeof ROLES)[number];

export interface User {
  id: string;
  email: string | null;
  name: string | null;
}

export interface Project {
  id: string;
  role: Role;
  permissions: string[];
  name: string;
  description?: string;
  environments: Environment[];
  secretCounts: Record<string, number>;
  createdAt: string;
  updatedAt: string;
}

export interface SecretMeta {
  id: string;
  key: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface VersionEntry {
  versionNumber: number;
  changeType: "CREATED" | "UPDATED" | "ROLLED_BACK" | "BASELINE";
  key: string;
  isCurrent: boolean;
  restoredFromVersion?: number;
  createdAt: string;
  changedBy: { userId: string; email?: string | null; isYou: boolean; isMember: boolean } | null;
}

export interface Member {
  userId: string;
  email?: string;
  name?: string;
  role: Role;
  isYou: boolean;
  createdAt: string;
}

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  environments: Environment[];
  createdAt: string;
  expiresAt: string;
  expired: boolean;
}

export interface AccessMatrix {
  environments: Environment[];
  members: {
    userId: string;
    email?: string;
    role: Role;
    isYou: boolean;
    secretPermissions: string[];
    access: Record<string, "implicit" | "granted" | "none">;
  }[];
}

export interface AuditEvent {
  id: string;
  at: string;
  action: string;
  targetType: string;
  targetId: string;
  metadata: Record<string, unknown>;
  actor: { userId: string | null; email?: string | null; isYou: boolean; isMember: boolean } | null;
}

export interface CliSession {
  id: string;
  deviceName: string;
  createdAt: string;
  lastUsedAt: string;
  expiresAt: string;
}

export const projectPath = (projectId: string) => `/api/projects/${encodeURIComponent(projectId)}`;
export const envPath = (projectId: string, env: string) => `${projectPath(projectId)}/environments/${encodeURIComponent(env)}`;
