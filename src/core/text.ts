// Text that people type for other people to read (project names, descriptions, display
// names) ends up in terminals and audit sentences. A control character or a bidirectional
// override there could rewrite a terminal line or make a name read as another one, so the
// server refuses them and the CLI never prints them.

// Control characters, line and paragraph separators, the byte-order mark and every
// bidirectional mark, embedding, override and isolate. Zero-width joiners stay allowed:
// emoji sequences need them. And a lone surrogate (\p{Cs} matches only unpaired halves
// under the u flag): stored as UTF-8 it becomes U+FFFD, so a name would be checked for
// uniqueness as one text and kept as another.
const UNSAFE = /[\p{Cc}\p{Cs}\p{Zl}\p{Zp}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/u;
const UNSAFE_ALL = new RegExp(UNSAFE.source, "gu");
const UNSAFE_EXCEPT_LINE_BREAKS = new RegExp(`(?![\\n\\t])${UNSAFE.source}`, "u");
const UNSAFE_EXCEPT_LINE_BREAKS_ALL = new RegExp(UNSAFE_EXCEPT_LINE_BREAKS.source, "gu");
export const DISPLAY_NAME_MAX = 100;
/** The ids this server makes (crypto.randomUUID), in any case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a one-line name: nothing that moves the cursor, breaks the line or flips direction. */
export function isSingleLine(text: string): boolean {
  return !UNSAFE.test(text);
}

/** True for a free text that may span lines (tabs and line feeds allowed, nothing else unsafe). */
export function isPlainText(text: string): boolean {
  return !UNSAFE_EXCEPT_LINE_BREAKS.test(text);
}

/** A name someone typed or an identity provider sent, made fit to show: unsafe characters become spaces. */
export function displayName(text: string): string | null {
  const cleaned = text.replace(UNSAFE_ALL, " ").replace(/\s+/g, " ").trim();
  return cleaned ? [...cleaned].slice(0, DISPLAY_NAME_MAX).join("") : null;
}

/** The text with every unsafe character replaced, for printing what a server sent. */
export function printable(text: string): string {
  return text.replace(UNSAFE_ALL, "\ufffd");
}

/**
 * A name as compared for uniqueness and looked up by: NFKC (an accent typed composed or
 * not, a fullwidth letter and its plain one are one character), without the characters
 * that show nothing (zero-width space, soft hyphen, joiners, variation selectors, Hangul
 * fillers), ignoring case. "Billing", "Ｂilling" and "Bill\u00adiNG" are one name.
 */
export function nameKey(name: string): string {
  // Normalized again once the invisible characters are out (one between a letter and its
  // accent kept them apart); upper then lower case folds ß as SS.
  return name
    .normalize("NFKC")
    .replace(/\p{Default_Ignorable_Code_Point}/gu, "")
    .normalize("NFKC")
    .toUpperCase()
    .toLowerCase();
}

/**
 * An e-mail address as compared: trimmed, ASCII letters in lower case and nothing else
 * folded. JavaScript's toLowerCase maps some other letters onto ASCII ones (the Kelvin sign
 * to k), so an address a provider verified as someone's own would match another person's
 * invitation. SQLite's lower() and PostgreSQL's on our "C" columns fold the same way.
 */
export function foldEmail(email: string): string {
  return foldAsciiCase(email.trim());
}

/** ASCII letters in lower case, every other character as it is (see foldEmail). */
function foldAsciiCase(text: string): string {
  return text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** True when a name shows something: not only spaces and characters that show nothing. */
export function isVisibleName(name: string): boolean {
  return nameKey(name).trim().length > 0;
}

/**
 * Bytes as UTF-8 text, or undefined when they are not. Decoded leniently, a binary file or a
 * Latin-1 `é` would be stored with U+FFFD in its place and reported as written: the CLI's
 * import and set --from-stdin and the web UI's file import refuse such bytes instead. A
 * byte-order mark stays, as the dotenv reader expects.
 */
export function strictUtf8(bytes: ArrayBuffer | Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** "1 record", "2 records". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** Like printable(), but line breaks and tabs stay: for messages of several lines. */
export function printableLines(text: string): string {
  return text.replace(UNSAFE_EXCEPT_LINE_BREAKS_ALL, "\ufffd");
}

/**
 * A length check in UTF-16 code units: JavaScript's `length`, what an HTML `maxlength`
 * counts and what the README promises. zod's `.max()` counts code points instead, which
 * let 10,000 emoji (20,000 units) through a 10,000 limit.
 */
export function fitsUnits(max: number): (text: string) => boolean {
  return (text) => text.length <= max;
}

/**
 * Shapes of our own credentials. The audit log's allow-list keeps them out by key; this
 * catches a token passed under an allowed key (an `error` text quoting a request, say).
 * Our tokens are svc_at_/svc_rt_ followed by 43 url-safe characters; 20 or more is what
 * the server takes as token-shaped anywhere.
 */
export const TOKEN_SHAPES = /svc_(at|rt|st|wt)_[A-Za-z0-9_-]{20,}/g;

/** `text` with anything shaped like one of our tokens replaced by "[redacted]". */
export function redactTokens(text: string): string {
  return text.replace(TOKEN_SHAPES, "[redacted]");
}

/**
 * Text that would look like one of our tokens. Inputs that end up in audit metadata (secret
 * keys, project names) are refused with this up front, so their owner gets a clear 400, and
 * the CLI checks keys with it before it writes anything.
 */
export function looksLikeToken(text: string): boolean {
  return new RegExp(TOKEN_SHAPES.source).test(text);
}
