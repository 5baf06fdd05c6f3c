// Runs before `npm test`: the browser tests drive Debian's Chromium at /usr/bin/chromium (no
// browser is downloaded from elsewhere), and the export format tests source files in zsh
// (bash and dash come with Debian). Install what is missing when allowed to.
import { execFileSync } from "node:child_process";
import fs from "node:fs";

const NEEDED = [
  { file: "/usr/bin/chromium", pkg: "chromium", why: "the browser tests" },
  { file: "/usr/bin/zsh", pkg: "zsh", why: "the shell export tests" },
];

const missing = NEEDED.filter((tool) => !fs.existsSync(tool.file));
if (missing.length > 0) {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  const packages = missing.map((tool) => tool.pkg);
  if (!isRoot || !fs.existsSync("/usr/bin/apt-get")) {
    const what = missing.map((tool) => `${tool.file} (${tool.why})`).join(" and ");
    console.error(`The tests need Debian's ${what}: run "sudo apt-get install ${packages.join(" ")}", then npm test again.`);
    process.exit(1);
  }
  console.log(`Installing Debian's ${packages.join(" and ")} for the tests (apt-get)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { stdio: "inherit", env });
}
