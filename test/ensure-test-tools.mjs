// Runs before `npm test`: the browser tests drive Debian's Chromium, its headless build
// /usr/bin/chromium-headless-shell or else /usr/bin/chromium (no browser is downloaded from
// elsewhere), the export format tests source files in zsh (bash and dash come with Debian),
// and the PostgreSQL pass runs Debian's initdb and pg_ctl in a throwaway cluster (no
// PostgreSQL server needs to be running). Install what is missing when allowed to.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

/** initdb on PATH, or in one of Debian's versioned folders (off PATH). */
function hasInitdb() {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir && fs.existsSync(path.join(dir, "initdb"))) return true;
  }
  const debian = "/usr/lib/postgresql";
  return fs.existsSync(debian) && fs.readdirSync(debian).some((version) => fs.existsSync(path.join(debian, version, "bin", "initdb")));
}

const NEEDED = [
  {
    present: () => fs.existsSync("/usr/bin/chromium-headless-shell") || fs.existsSync("/usr/bin/chromium"),
    what: "Chromium (/usr/bin/chromium-headless-shell)",
    pkg: "chromium-headless-shell",
    why: "the browser tests",
  },
  { present: () => fs.existsSync("/usr/bin/zsh"), what: "/usr/bin/zsh", pkg: "zsh", why: "the shell export tests" },
  // Not fatal: `npm test -- --store=sqlite` needs no PostgreSQL, and the PostgreSQL pass
  // itself says what is missing.
  { present: hasInitdb, what: "PostgreSQL's initdb", pkg: "postgresql", why: "the PostgreSQL pass", optional: true },
];

const missing = NEEDED.filter((tool) => !tool.present());
if (missing.length > 0) {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  const packages = missing.map((tool) => tool.pkg);
  if (!isRoot || !fs.existsSync("/usr/bin/apt-get")) {
    const what = missing.map((tool) => `${tool.what} (${tool.why})`).join(" and ");
    console.error(`The tests need Debian's ${what}: run "sudo apt-get install ${packages.join(" ")}", then npm test again.`);
    if (!missing.every((tool) => tool.optional)) process.exit(1);
    // Nothing this user may install: the tests go on without what is optional.
    console.error("Without PostgreSQL: npm test -- --store=sqlite.");
    process.exit(0);
  }
  console.log(`Installing Debian's ${packages.join(" and ")} for the tests (apt-get)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { stdio: "inherit", env });
}
