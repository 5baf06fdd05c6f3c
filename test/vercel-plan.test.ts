// The sync planner (src/integrations/vercel/vercel.plan.ts) on tables of cases: it is pure,
// so each rule is one row here; test/vercel.test.ts proves the whole sync against the fake
// Vercel API.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  createOutcome,
  type Operation,
  type PlatformVar,
  type Policy,
  parseMappings,
  planSync,
} from "../src/integrations/vercel/vercel.plan.ts";

const SKIP: Policy = { conflictPolicy: "skip" };
const OVERWRITE: Policy = { conflictPolicy: "overwrite" };

function platformVar(id: string, key: string, fields: Partial<PlatformVar> = {}): PlatformVar {
  return { id, key, type: "encrypted", target: ["development"], value: undefined, ...fields };
}

interface Case {
  name: string;
  platform: PlatformVar[];
  secrets: Record<string, string>;
  /** key → id of the var we created for the target, or a claim. */
  created?: Record<string, string>;
  /** Keys whose claim the var at Vercel holds (the executor compares digests). */
  claimsHeld?: string[];
  policy?: Policy;
  target?: string;
  expected: Operation[];
}

const cases: Case[] = [
  {
    name: "no var for the key: create",
    platform: [],
    secrets: { API_URL: "https://dev.example.test" },
    expected: [{ op: "create", key: "API_URL", value: "https://dev.example.test" }],
  },
  {
    name: "a var of the same key for another target does not count: create one for this target",
    platform: [platformVar("env_preview", "API_URL", { target: ["preview"], value: "https://preview.example.test" })],
    secrets: { API_URL: "https://dev.example.test" },
    expected: [{ op: "create", key: "API_URL", value: "https://dev.example.test" }],
  },
  {
    name: "a var for a git branch does not count: create",
    platform: [platformVar("env_branch", "API_URL", { gitBranch: "feature-x", value: "branch-value" })],
    secrets: { API_URL: "https://dev.example.test" },
    expected: [{ op: "create", key: "API_URL", value: "https://dev.example.test" }],
  },
  {
    name: "someone else's var with the same value: unchanged",
    platform: [platformVar("env_1", "SAME", { value: "same-value" })],
    secrets: { SAME: "same-value" },
    expected: [{ op: "unchanged", key: "SAME" }],
  },
  {
    name: "our var with the same value: unchanged",
    platform: [platformVar("env_1", "SAME", { value: "same-value" })],
    secrets: { SAME: "same-value" },
    created: { SAME: "env_1" },
    expected: [{ op: "unchanged", key: "SAME" }],
  },
  {
    name: "our record points at a var that no longer holds the key, someone else's holds the same value: unchanged, record forgotten",
    platform: [platformVar("env_theirs", "SAME", { value: "same-value" })],
    secrets: { SAME: "same-value" },
    created: { SAME: "env_gone" },
    expected: [
      { op: "unchanged", key: "SAME" },
      { op: "forget", key: "SAME" },
    ],
  },
  {
    name: "our var with another value: update in place, under skip too",
    platform: [platformVar("env_1", "TOKEN_A", { value: "first-value" })],
    secrets: { TOKEN_A: "second-value" },
    created: { TOKEN_A: "env_1" },
    expected: [{ op: "update", key: "TOKEN_A", value: "second-value", hostEnvId: "env_1" }],
  },
  {
    name: "someone else's var with another value under skip: skipped (exists)",
    platform: [platformVar("env_1", "SHARED_KEY", { value: "someone-elses" })],
    secrets: { SHARED_KEY: "ours" },
    expected: [{ op: "skip", key: "SHARED_KEY", reason: "exists" }],
  },
  {
    name: "someone else's var with another value under overwrite: update in place",
    platform: [platformVar("env_1", "DB_URL", { value: "postgres://old" })],
    secrets: { DB_URL: "postgres://new" },
    policy: OVERWRITE,
    expected: [{ op: "update", key: "DB_URL", value: "postgres://new", hostEnvId: "env_1" }],
  },
  {
    name: "someone else's plain var under overwrite: updated and made encrypted (anyone on the Vercel project reads a plain one)",
    platform: [platformVar("env_1", "DB_URL", { type: "plain", value: "postgres://old" })],
    secrets: { DB_URL: "postgres://new" },
    policy: OVERWRITE,
    expected: [{ op: "update", key: "DB_URL", value: "postgres://new", hostEnvId: "env_1", encrypt: true }],
  },
  {
    name: "a var that also covers other targets is never changed, even ours under overwrite",
    platform: [platformVar("env_1", "MULTI", { target: ["development", "preview"], value: "old" })],
    secrets: { MULTI: "new" },
    created: { MULTI: "env_1" },
    policy: OVERWRITE,
    expected: [{ op: "skip", key: "MULTI", reason: "shared" }],
  },
  {
    name: "a shared var that already holds the value counts as unchanged",
    platform: [platformVar("env_1", "MULTI", { target: ["development", "preview"], value: "same" })],
    secrets: { MULTI: "same" },
    expected: [{ op: "unchanged", key: "MULTI" }],
  },
  {
    name: "a sensitive var (value never readable) is never unchanged: updated under overwrite",
    platform: [platformVar("env_1", "HIDDEN", { type: "sensitive" })],
    secrets: { HIDDEN: "hidden-new" },
    policy: OVERWRITE,
    expected: [{ op: "update", key: "HIDDEN", value: "hidden-new", hostEnvId: "env_1" }],
  },
  {
    name: "someone else's sensitive var under skip: skipped (exists)",
    platform: [platformVar("env_1", "HIDDEN", { type: "sensitive" })],
    secrets: { HIDDEN: "hidden-new" },
    expected: [{ op: "skip", key: "HIDDEN", reason: "exists" }],
  },
  {
    name: "a system var is never written: skipped (unreadable) under overwrite",
    platform: [platformVar("env_1", "VERCEL_URL", { type: "system" })],
    secrets: { VERCEL_URL: "mine" },
    policy: OVERWRITE,
    expected: [{ op: "skip", key: "VERCEL_URL", reason: "unreadable" }],
  },
  {
    name: "our var whose secret is gone, still at Vercel: delete",
    platform: [platformVar("env_1", "GONE_SOON", { value: "x" })],
    secrets: {},
    created: { GONE_SOON: "env_1" },
    expected: [{ op: "delete", key: "GONE_SOON", hostEnvId: "env_1" }],
  },
  {
    name: "our var whose secret is gone, since given other targets at Vercel: forgotten, not deleted",
    platform: [platformVar("env_1", "GONE_SOON", { value: "x", target: ["development", "preview"] })],
    secrets: {},
    created: { GONE_SOON: "env_1" },
    expected: [{ op: "forget", key: "GONE_SOON" }],
  },
  {
    name: "our var whose secret is gone, since moved to another target or renamed at Vercel: forgotten, not deleted",
    platform: [platformVar("env_1", "GONE_SOON", { value: "x", target: ["preview"] }), platformVar("env_2", "RENAMED", { value: "y" })],
    secrets: {},
    created: { GONE_SOON: "env_1", OLD_NAME: "env_2" },
    expected: [
      { op: "forget", key: "GONE_SOON" },
      { op: "forget", key: "OLD_NAME" },
    ],
  },
  {
    name: "our var whose secret is gone and that is gone at Vercel too: record forgotten, no call",
    platform: [],
    secrets: {},
    created: { GONE_SOON: "env_1" },
    expected: [{ op: "forget", key: "GONE_SOON" }],
  },
  {
    name: "someone else's var with no secret of ours: left alone, whatever the policy",
    platform: [platformVar("env_1", "KEEP_THEIRS", { value: "theirs" })],
    secrets: {},
    policy: OVERWRITE,
    expected: [],
  },
  {
    name: "the first var Vercel lists for a key stands for it",
    platform: [platformVar("env_first", "DUP", { value: "first" }), platformVar("env_second", "DUP", { value: "second" })],
    secrets: { DUP: "second" },
    policy: OVERWRITE,
    expected: [{ op: "update", key: "DUP", value: "second", hostEnvId: "env_first" }],
  },
  {
    name: "the production target sees only production vars",
    target: "production",
    platform: [
      platformVar("env_dev", "API_URL", { target: ["development"], value: "dev" }),
      platformVar("env_prod", "API_URL", { target: ["production"], value: "prod" }),
    ],
    secrets: { API_URL: "prod" },
    expected: [{ op: "unchanged", key: "API_URL" }],
  },
  {
    name: "names Vercel refuses are planned like any other: Vercel's answer decides (see createOutcome)",
    platform: [],
    secrets: { TZ: "reserved-at-vercel", _LEADING: "vercel-refuses-this" },
    expected: [
      { op: "create", key: "TZ", value: "reserved-at-vercel" },
      { op: "create", key: "_LEADING", value: "vercel-refuses-this" },
    ],
  },
  {
    name: "an unanswered create of ours, the var there alone with our value: unchanged, and taken as ours",
    platform: [platformVar("env_made", "LOST", { value: "our-value" })],
    secrets: { LOST: "our-value" },
    created: { LOST: "" },
    // An older claim is held by the secret's value: the executor judges that (claimHolds).
    claimsHeld: ["LOST"],
    expected: [
      { op: "adopt", key: "LOST", hostEnvId: "env_made" },
      { op: "unchanged", key: "LOST" },
    ],
  },
  {
    name: "a claim the var holds, the secret changed since: taken as ours and updated",
    platform: [platformVar("env_made", "LOST", { value: "sent-value" })],
    secrets: { LOST: "new-value" },
    created: { LOST: "unanswered:1:digest" },
    claimsHeld: ["LOST"],
    expected: [
      { op: "adopt", key: "LOST", hostEnvId: "env_made" },
      { op: "update", key: "LOST", value: "new-value", hostEnvId: "env_made" },
    ],
  },
  {
    name: "a claim the var holds, the secret gone since: the var is deleted",
    platform: [platformVar("env_made", "LOST", { value: "sent-value" })],
    secrets: {},
    created: { LOST: "unanswered:1:digest" },
    claimsHeld: ["LOST"],
    expected: [{ op: "delete", key: "LOST", hostEnvId: "env_made" }],
  },
  {
    name: "a claim the var does not hold, the secret gone since: forgotten, the var left alone",
    platform: [platformVar("env_other", "LOST", { value: "their-value" })],
    secrets: {},
    created: { LOST: "unanswered:1:digest" },
    expected: [{ op: "forget", key: "LOST" }],
  },
  {
    name: "a claim the var holds, but it now has other targets too: forgotten, the var left alone",
    platform: [platformVar("env_made", "LOST", { target: ["development", "preview"], value: "sent-value" })],
    secrets: {},
    created: { LOST: "unanswered:1:digest" },
    claimsHeld: ["LOST"],
    expected: [{ op: "forget", key: "LOST" }],
  },
  {
    name: "an unanswered create, nothing at Vercel: create again",
    platform: [],
    secrets: { LOST: "our-value" },
    created: { LOST: "" },
    expected: [{ op: "create", key: "LOST", value: "our-value" }],
  },
  {
    name: "an unanswered create, a var with another value: the claim goes, and the policy decides as for anyone's",
    platform: [platformVar("env_other", "LOST", { value: "their-value" })],
    secrets: { LOST: "our-value" },
    created: { LOST: "" },
    expected: [
      { op: "forget", key: "LOST" },
      { op: "skip", key: "LOST", reason: "exists" },
    ],
  },
  {
    name: "an unanswered create, our value in a var shared with other targets: not ours, claim forgotten",
    platform: [platformVar("env_shared", "LOST", { target: ["development", "preview"], value: "our-value" })],
    secrets: { LOST: "our-value" },
    created: { LOST: "" },
    expected: [
      { op: "forget", key: "LOST" },
      { op: "unchanged", key: "LOST" },
    ],
  },
  {
    name: "an unanswered create whose secret is gone: the claim is forgotten, nothing deleted",
    platform: [platformVar("env_made", "LOST", { value: "our-value" })],
    secrets: {},
    created: { LOST: "" },
    expected: [{ op: "forget", key: "LOST" }],
  },
  {
    name: "order: in place first, then creates, then deletes",
    platform: [platformVar("env_a", "A", { value: "old" }), platformVar("env_old", "OLD", { value: "x" })],
    secrets: { NEW: "n", A: "new" },
    created: { A: "env_a", OLD: "env_old" },
    expected: [
      { op: "update", key: "A", value: "new", hostEnvId: "env_a" },
      { op: "create", key: "NEW", value: "n" },
      { op: "delete", key: "OLD", hostEnvId: "env_old" },
    ],
  },
];

for (const c of cases) {
  test(`planSync: ${c.name}`, () => {
    const ours = {
      target: c.target ?? "development",
      secrets: Object.entries(c.secrets).map(([key, value]) => ({ key, value })),
      created: new Map(Object.entries(c.created ?? {})),
      claimsHeld: new Set(c.claimsHeld ?? []),
    };
    assert.deepEqual(planSync(c.platform, ours, c.policy ?? SKIP), c.expected);
  });
}

interface CreateCase {
  name: string;
  sent: string[];
  created: { id?: unknown; key?: unknown }[];
  failed: { key?: string; code?: string }[];
  nothingWritten?: boolean;
  expected: ReturnType<typeof createOutcome>;
}

const createCases: CreateCase[] = [
  {
    name: "all created",
    sent: ["A", "B"],
    created: [
      { id: "env_a", key: "A" },
      { id: "env_b", key: "B" },
    ],
    failed: [],
    expected: {
      created: [
        { key: "A", hostEnvId: "env_a" },
        { key: "B", hostEnvId: "env_b" },
      ],
      refused: [],
      unanswered: [],
    },
  },
  {
    name: "names Vercel refuses (reserved, bad key) fail as rejected; the rest of the batch is created",
    sent: ["OK_KEY", "TZ", "_LEADING"],
    created: [{ id: "env_ok", key: "OK_KEY" }],
    failed: [
      { key: "TZ", code: "bad_request" },
      { key: "_LEADING", code: "bad_request" },
    ],
    expected: {
      created: [{ key: "OK_KEY", hostEnvId: "env_ok" }],
      refused: [
        { key: "TZ", result: "failed", reason: "rejected" },
        { key: "_LEADING", result: "failed", reason: "rejected" },
      ],
      unanswered: [],
    },
  },
  {
    name: "a clash (ENV_CONFLICT, or the older ENV_ALREADY_EXISTS) is skipped as a conflict",
    sent: ["A", "B"],
    created: [],
    failed: [
      { key: "A", code: "ENV_CONFLICT" },
      { key: "B", code: "ENV_ALREADY_EXISTS" },
    ],
    expected: {
      created: [],
      refused: [
        { key: "A", result: "skipped", reason: "conflict" },
        { key: "B", result: "skipped", reason: "conflict" },
      ],
      unanswered: [],
    },
  },
  {
    name: "a key neither created nor named is unanswered (its claim stays), even beside a failure naming no key",
    sent: ["A", "B"],
    created: [{ id: "env_a", key: "A" }],
    failed: [{ code: "bad_request" }],
    expected: { created: [{ key: "A", hostEnvId: "env_a" }], refused: [], unanswered: ["B"] },
  },
  {
    name: "a 400 wrote nothing: a key its failures do not name is rejected, not unanswered",
    sent: ["A", "B"],
    created: [],
    failed: [{ key: "A", code: "bad_request" }, { code: "bad_request" }],
    nothingWritten: true,
    expected: {
      created: [],
      refused: [
        { key: "A", result: "failed", reason: "rejected" },
        { key: "B", result: "failed", reason: "rejected" },
      ],
      unanswered: [],
    },
  },
  {
    name: "a 2xx whose body could not be read: every key sent is unanswered",
    sent: ["A", "B"],
    created: [],
    failed: [],
    expected: { created: [], refused: [], unanswered: ["A", "B"] },
  },
  {
    name: "a key named twice, or named though created, counts once",
    sent: ["A", "B"],
    created: [{ id: "env_a", key: "A" }],
    failed: [
      { key: "A", code: "bad_request" },
      { key: "B", code: "bad_request" },
      { key: "B", code: "ENV_CONFLICT" },
    ],
    expected: {
      created: [{ key: "A", hostEnvId: "env_a" }],
      refused: [{ key: "B", result: "failed", reason: "rejected" }],
      unanswered: [],
    },
  },
  {
    name: "a created entry without an id is not trusted as an id, but not as a refusal either: unanswered",
    sent: ["A"],
    created: [{ key: "A" }],
    failed: [],
    expected: { created: [], refused: [], unanswered: ["A"] },
  },
];

for (const c of createCases) {
  test(`createOutcome: ${c.name}`, () => {
    assert.deepEqual(createOutcome(c.sent, { created: c.created, failed: c.failed, nothingWritten: c.nothingWritten }), c.expected);
  });
}

test("parseMappings: stored JSON objects only; anything else is no mapping", () => {
  const rows: [string, Record<string, string>][] = [
    ['{"development":"development","production":"production"}', { development: "development", production: "production" }],
    ["[]", {}],
    ["null", {}],
    ["not json", {}],
  ];
  for (const [mappings, expected] of rows) assert.deepEqual(parseMappings({ mappings }), expected, mappings);
});
