// The CLI's HTTP client reads at most MAX_ANSWER_BYTES of an answer: a server that sends
// more, or never stops, fails the command instead of filling the memory.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { HttpFailure, httpRequest, MAX_ANSWER_BYTES } from "../src/core/http-client.ts";
import { cliHome } from "./cli-helpers.ts";
import { runMain } from "./helpers.ts";

async function serve(t: { after(fn: () => unknown): void }, handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test("an answer up to the limit is read whole; one past it, declared or streamed without end, fails as TOO_LARGE", async (t) => {
  let streamed = 0;
  const url = await serve(t, (req, res) => {
    if (req.url === "/exact") return void res.end("x".repeat(1_000));
    if (req.url === "/declared") {
      // Declares more than the limit: refused before any of it is read.
      res.writeHead(200, { "content-length": String(MAX_ANSWER_BYTES + 1) });
      return void res.write("x");
    }
    // Chunked, without end: the client must stop it.
    res.writeHead(200, { "content-type": "text/plain" });
    const more = () => {
      while (res.write("y".repeat(512))) streamed += 512;
      streamed += 512;
    };
    res.on("drain", more);
    more();
  });

  const exact = await httpRequest(`${url}/exact`, { timeoutMs: 10_000, maxBytes: 1_000 });
  assert.deepEqual([exact.status, exact.text.length], [200, 1_000]);

  const declared = await httpRequest(`${url}/declared`, { timeoutMs: 10_000 }).catch((error: unknown) => error);
  assert.ok(declared instanceof HttpFailure);
  assert.deepEqual([declared.code, declared.message], ["TOO_LARGE", "the answer is larger than 128 MiB"]);

  const endless = await httpRequest(`${url}/endless`, { timeoutMs: 10_000, maxBytes: 100_000 }).catch((error: unknown) => error);
  assert.ok(endless instanceof HttpFailure);
  assert.deepEqual([endless.code, endless.message], ["TOO_LARGE", "the answer is larger than 100000 bytes"]);
  // It stopped reading soon after the limit, not at the timeout.
  assert.ok(streamed < 10_000_000, `the server wrote ${streamed} bytes`);
});

test("a command whose server answers too much fails with one line and exit 1, not as unreachable", async (t) => {
  const url = await serve(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": String(MAX_ANSWER_BYTES + 1) });
    res.write("[");
  });
  const home = cliHome(t);
  const result = await runMain(["projects"], { ...home.env, SECRETS_SERVER_URL: url, SECRETS_SERVER_TOKEN: `svc_st_${"a".repeat(43)}` });
  assert.equal(result.code, 1, result.stderr);
  assert.equal(result.stderr.trim(), `secrets-server: Stopped reading ${url}: the answer is larger than 128 MiB.`);
});
