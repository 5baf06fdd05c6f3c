/**
 * Whether a URL's host names this machine: `localhost`, 127.0.0.0/8 or ::1 (with or
 * without the brackets a URL puts around it). Where plain http is allowed at all (APP_URL,
 * identity issuers, the CLI's server), it is allowed only for these: traffic that never
 * leaves the machine.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
