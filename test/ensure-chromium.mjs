// Runs before `npm test`: the browser tests drive Debian's Chromium at /usr/bin/chromium
// (no browser is downloaded from elsewhere). Install it when missing and allowed to.
import { execFileSync } from "node:child_process";
import fs from "node:fs";

const CHROMIUM = "/usr/bin/chromium";

if (!fs.existsSync(CHROMIUM)) {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (!isRoot || !fs.existsSync("/usr/bin/apt-get")) {
    console.error(`The browser tests need Debian's Chromium at ${CHROMIUM}: run "sudo apt-get install chromium", then npm test again.`);
    process.exit(1);
  }
  console.log("Installing Debian's chromium for the browser tests (apt-get)...");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", "chromium"], { stdio: "inherit", env });
}
