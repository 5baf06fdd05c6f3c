// Local sign-in under attack: parallel guesses, guesses from many addresses, and forged
// client addresses (issue 14, item 4).
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { ConfigError, loadConfig } from "../src/core/config.ts";
import { makeTempDir, runMain } from "./helpers.ts";

const TRUST_PROXY_TRUE =
  "TRUST_PROXY=true would let any client choose its address through X-Forwarded-For: set it to the number of proxies in front of the server (a hop count from 1 to 10) or a comma-separated list of their addresses (IP, IP/prefix, loopback, linklocal, uniquelocal).";

test("TRUST_PROXY=true (or a spelling of it) is refused at start with one line", async () => {
  for (const value of ["true", "TRUE", "yes", "on", "*", "11", "1000"]) {
    assert.throws(
      () => loadConfig({ TRUST_PROXY: value }),
      (error: unknown) => error instanceof ConfigError && error.message === TRUST_PROXY_TRUE.replace("TRUST_PROXY=true", `TRUST_PROXY=${value}`),
      value,
    );
  }
  assert.equal(loadConfig({ TRUST_PROXY: "1" }).trustProxy, 1);
  assert.equal(loadConfig({ TRUST_PROXY: "10" }).trustProxy, 10);
  assert.deepEqual(loadConfig({ TRUST_PROXY: "10.0.0.1, loopback" }).trustProxy, ["10.0.0.1", "loopback"]);

  const dataDir = makeTempDir();
  try {
    const result = await runMain(["serve"], { DATA_DIR: dataDir, PORT: "0", TRUST_PROXY: "true" });
    assert.equal(result.code, 1);
    assert.equal(result.stderr, `secrets-server: configuration error: ${TRUST_PROXY_TRUE}\n`);
    assert.equal(result.stdout, "");
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
