// The audit page's From/To days as the API's bounds; no DOM, so the tests can run it in
// several time zones (test/web-audit-dates.test.ts).

// The years the API reads: past them toISOString() writes "+010000-…" or "-000001-…".
const FIRST_API_TIME = Date.parse("0000-01-01T00:00:00.000Z");
const LAST_API_TIME = Date.parse("9999-12-31T23:59:59.999Z");

/**
 * A date picked in the From/To fields, as the bounds of that day in this browser's time zone
 * (the times shown are local; the API reads a bare YYYY-MM-DD as a UTC day). `end` gives the
 * day's last millisecond, which the API includes.
 */
export function localDayBound(date: string, end: boolean): string {
  const [year, month, day] = date.split("-").map(Number) as [number, number, number];
  // setFullYear, not the constructor, which reads years 0 to 99 as 1900 to 1999.
  const midnight = new Date(0);
  midnight.setFullYear(year, month - 1, end ? day + 1 : day);
  midnight.setHours(0, 0, 0, 0);
  const at = Math.min(Math.max(midnight.getTime() - (end ? 1 : 0), FIRST_API_TIME), LAST_API_TIME);
  return new Date(at).toISOString();
}
