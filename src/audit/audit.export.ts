// The audit log as CSV (RFC 4180): one row per event, the fields people filter on in columns
// of their own and the whole metadata as JSON in the last one.
import type { AuditEventView } from "./audit.service.ts";

const COLUMNS = [
  "at",
  "action",
  "category",
  "actor",
  "actorUserId",
  "serviceAccount",
  "environment",
  "key",
  "targetType",
  "targetId",
  "metadata",
];

// Where a cell starts (the text's start, a `;`, or a line break), followed by a formula's first character.
const FORMULA_START = /(^|;|\r\n?|\n)(?=[\s"]*[=+\-@\t\r])/g;

/**
 * One cell. A spreadsheet runs text starting with = + - @ (or a tab or carriage return) as a
 * formula, also past spaces or a quote, which it may drop first; and an e-mail address or a
 * service account name is chosen by users: such a cell gets a leading ' so it stays text.
 * Excel in many locales (de-DE, fr-FR) splits a .csv at `;` instead, where a name `ci;=1+1`
 * would start a cell of its own: a ' goes after such a `;` too, and after a line break, where
 * such a spreadsheet, which knows no quoted cells, starts a row. Then quoted when it holds a
 * quote, comma or line break.
 */
function csvCell(value: string): string {
  const text = value.replace(FORMULA_START, "$1'");
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function text(value: unknown): string {
  return typeof value === "string" || typeof value === "number" ? String(value) : "";
}

export function auditCsv(events: AuditEventView[]): string {
  const lines = [COLUMNS.join(",")];
  for (const event of events) {
    const row = [
      event.at,
      event.action,
      event.category,
      event.actor?.email ?? "",
      event.actor?.userId ?? "",
      event.serviceAccount?.name ?? "",
      text(event.metadata.environment),
      text(event.metadata.key),
      event.targetType,
      event.targetId,
      JSON.stringify(event.metadata),
    ];
    lines.push(row.map(csvCell).join(","));
  }
  return `${lines.join("\r\n")}\r\n`;
}
