// The folders of src/ are the features, and their imports form no cycle: a feature can be
// read (and moved) without the ones that use it. Type-only imports count too, since they tie
// the folders together just the same. The files at the root of src/ (app.ts, main.ts, …) wire
// the features together; each is its own node, and no folder may import app.ts or main.ts.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT } from "./helpers.ts";

const SRC = path.join(ROOT, "src");

type Graph = Map<string, Map<string, string>>;

/** The folder a file belongs to: `members`, `integrations/vercel`, or the file itself at the root. */
function nodeOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  if (parts.length === 1) return parts[0]!;
  if (parts[0] === "integrations" && parts.length > 2) return `${parts[0]}/${parts[1]}`;
  return parts[0]!;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

/** Every relative module a file names: static imports and re-exports, and dynamic import(). */
function importsOf(source: string): string[] {
  const found: string[] = [];
  for (const match of source.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm)) found.push(match[1]!);
  return found;
}

/** Folder to folder edges, each with one import that makes it (for the failure message). */
function folderGraph(): Graph {
  const graph: Graph = new Map();
  for (const file of sourceFiles(SRC)) {
    const from = nodeOf(file);
    const edges = graph.get(from) ?? new Map<string, string>();
    graph.set(from, edges);
    for (const specifier of importsOf(fs.readFileSync(file, "utf8"))) {
      const target = path.resolve(path.dirname(file), specifier);
      if (!target.startsWith(SRC + path.sep)) continue;
      const to = nodeOf(target);
      if (to !== from && !edges.has(to)) edges.set(to, `${path.relative(SRC, file)} imports ${specifier}`);
    }
  }
  return graph;
}

/** Strongly connected components of more than one node (Tarjan): each is a cycle. */
function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node)?.keys() ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

function describe(graph: Graph, component: string[]): string {
  const lines = component.flatMap((from) =>
    [...(graph.get(from) ?? [])].filter(([to]) => component.includes(to)).map(([to, why]) => `  ${from} -> ${to}: ${why}`),
  );
  return `${component.join(" ⇄ ")}\n${lines.join("\n")}`;
}

test("the cycle check finds a cycle when there is one", () => {
  const graph: Graph = new Map([
    ["members", new Map([["invitations", "members/a.ts imports ../invitations/b.ts"]])],
    [
      "invitations",
      new Map([
        ["members", "invitations/b.ts imports ../members/a.ts"],
        ["core", "x"],
      ]),
    ],
    ["core", new Map()],
  ]);
  assert.deepEqual(cycles(graph), [["invitations", "members"]]);
  assert.deepEqual(importsOf(`import type { A } from "../a/b.ts";\nexport { c } from "./c.ts";\nawait import("../d/e.ts");`), [
    "../a/b.ts",
    "./c.ts",
    "../d/e.ts",
  ]);
});

test("no two folders of src/ import each other, directly or around a loop", () => {
  const graph = folderGraph();
  // The walk saw the features (a broken walk would pass vacuously).
  for (const folder of ["core", "members", "invitations", "users", "sign-in", "secrets", "integrations/vercel"]) {
    assert.ok(graph.has(folder), `${folder} not found under src/`);
  }
  assert.ok(graph.get("invitations")?.has("core"));
  const found = cycles(graph);
  assert.deepEqual(
    found.map((c) => describe(graph, c)),
    [],
  );
});

test("core imports no feature, and no folder imports the server's wiring", () => {
  const graph = folderGraph();
  const coreImports = [...(graph.get("core") ?? [])].map(([to, why]) => `${to}: ${why}`);
  assert.deepEqual(coreImports, []);
  // The root files wire the server and the commands; only they may import app.ts or main.ts.
  for (const [from, edges] of graph) {
    if (from.endsWith(".ts")) continue;
    for (const wiring of ["app.ts", "main.ts"]) assert.ok(!edges.has(wiring), `${from} -> ${wiring}: ${edges.get(wiring)}`);
  }
});

test("the README's folder map names every folder of src/", () => {
  const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("\n## Architecture\n"), readme.indexOf("\n## Reliability\n"));
  assert.ok(section.length > 100, "README has no Architecture section before Reliability");
  const listed = new Set([...section.matchAll(/^\| `([a-z/-]+)\/`/gm)].map((m) => m[1]));
  const folders = [...folderGraph().keys()].filter((node) => !node.endsWith(".ts"));
  assert.deepEqual(folders.filter((folder) => !listed.has(folder)).sort(), []);
  assert.deepEqual([...listed].filter((folder) => !folders.includes(folder!)).sort(), []);
});
