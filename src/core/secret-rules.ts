// A secret's key and value rules (README, "Secrets"), declared once: the server's schemas,
// the audit log's key filter and the CLI's checks before sending all use these.

import { looksLikeToken } from "./text.ts";

/** Letters, digits and underscores, not starting with a digit. */
export const SECRET_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const MAX_KEY_LENGTH = 128;
/** The 404 of a secret that is not there (deleted, or never was): the web UI tells it from a project's 404 by it. */
export const SECRET_NOT_FOUND = "Secret not found.";
/** Counted in UTF-16 code units, as the UI's maxlength counts (see fitsUnits). */
export const MAX_VALUE_UNITS = 10_000;
/** The largest import: the request body the server takes, and the file the UI and the CLI read. */
export const MAX_IMPORT_BYTES = 2_000_000;

/** A key's shape: letters, digits and underscores, not starting with a digit, at most 128 characters. */
export function hasKeyShape(key: unknown): key is string {
  return typeof key === "string" && key.length <= MAX_KEY_LENGTH && SECRET_KEY_PATTERN.test(key);
}

/** The key rules, token-shaped text included (a key goes into audit metadata, which refuses it). */
export function isSecretKey(key: string): boolean {
  return hasKeyShape(key) && !looksLikeToken(key);
}

/**
 * Whether text holds no lone surrogate, which would be stored as U+FFFD and read back
 * different. String.prototype.isWellFormed would say it, but the web UI supports browsers
 * without it (Firefox 115, Safari 16.0): \p{Cs} matches only an unpaired half under the u flag.
 */
export function isWellFormedText(text: string): boolean {
  return !/\p{Cs}/u.test(text);
}
