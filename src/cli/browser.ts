/**
 * Opens `url` in the desktop's browser, only when a person is at a terminal of a desktop
 * session; on a headless machine (a server, CI) nothing is started and the printed URL is
 * what counts.
 */
export function maybeOpenBrowser(url: string): void {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return;
  const opener =
    process.platform === "darwin"
      ? "open"
      : process.platform === "win32"
        ? undefined
        : process.env.DISPLAY || process.env.WAYLAND_DISPLAY
          ? "xdg-open"
          : undefined;
  if (!opener) return;
  try {
    // Loaded here, not with the CLI: every command would pay for it (see core/http-client.ts).
    const child = process.getBuiltinModule("node:child_process").spawn(opener, [url], { stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
  } catch {
    // Printing the URL is enough.
  }
}
