// The API reference page: plain HTML rendered on the server from the OpenAPI document, with
// one stylesheet of its own. No script and no inline style, so it passes the server's strict
// Content-Security-Policy, and nothing is fetched from elsewhere, so it works air-gapped.

type Json = Record<string, unknown>;

interface Operation {
  tags?: string[];
  summary?: string;
  description?: string;
  security?: Record<string, unknown>[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: Json }[];
  requestBody?: { content?: Record<string, { schema?: Json }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Json }> }>;
}

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Escaped prose, with `code` spans: the only markup the descriptions use. */
function prose(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, "<code>$1</code>");
}

function anchor(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");
}

/** A schema as a TypeScript-like type: short, and readable by people who never read JSON Schema. */
function typeText(schema: Json | undefined, indent = ""): string {
  if (!schema || Object.keys(schema).length === 0) return "any";
  if (typeof schema.$ref === "string") return schema.$ref.split("/").pop()!;
  const union = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (union) return union.map((member) => typeText(member, indent)).join(" | ");
  if ("const" in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => JSON.stringify(value)).join(" | ");
  if (Array.isArray(schema.type)) return schema.type.map((type) => typeText({ ...schema, type }, indent)).join(" | ");
  switch (schema.type) {
    case "array": {
      const item = typeText(schema.items as Json | undefined, indent);
      return item.includes(" ") && !item.startsWith("{") ? `(${item})[]` : `${item}[]`;
    }
    case "object": {
      const properties = schema.properties as Record<string, Json> | undefined;
      const extra = schema.additionalProperties;
      if (!properties || Object.keys(properties).length === 0) {
        return typeof extra === "object" && extra !== null ? `{ [name: string]: ${typeText(extra as Json, indent)} }` : "object";
      }
      const required = new Set((schema.required as string[] | undefined) ?? []);
      const inner = `${indent}  `;
      const lines = Object.entries(properties).map(([name, property]) => {
        const note = typeof property.description === "string" ? `  // ${property.description}` : "";
        return `${inner}${name}${required.has(name) ? "" : "?"}: ${typeText(property, inner)}${note}`;
      });
      return `{\n${lines.join("\n")}\n${indent}}`;
    }
    case "integer":
      return "integer";
    case "null":
      return "null";
    default:
      return typeof schema.type === "string" ? schema.type : "any";
  }
}

const CREDENTIAL_NAMES: Record<string, string> = { session: "browser session", bearer: "bearer token" };

function credentialText(security: Operation["security"]): string {
  if (!security || security.length === 0) return "No credential";
  // An empty requirement among them: the others are taken when sent, not needed.
  const optional = security.some((requirement) => Object.keys(requirement).length === 0);
  const named = security
    .flatMap((requirement) => Object.keys(requirement))
    .map((name) => CREDENTIAL_NAMES[name] ?? name)
    .join(" or ");
  const text = optional ? `no credential needed; a ${named} is used when sent` : named;
  return text.replace(/^./, (c) => c.toUpperCase());
}

function schemaBlock(schema: Json | undefined): string {
  return `<pre><code>${escapeHtml(typeText(schema))}</code></pre>`;
}

function operationHtml(method: string, path: string, operation: Operation): string {
  const id = anchor(`${method} ${path}`);
  const parts = [
    `<section class="operation" id="${id}">`,
    `<h3><span class="method method-${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>`,
    operation.summary ? `<p class="summary">${prose(operation.summary)}</p>` : "",
    operation.description ? `<p>${prose(operation.description)}</p>` : "",
    `<p class="credential">${escapeHtml(credentialText(operation.security))}</p>`,
  ];
  const parameters = operation.parameters ?? [];
  if (parameters.length > 0) {
    parts.push(
      "<table><thead><tr><th>Parameter</th><th>In</th><th>Type</th><th>Notes</th></tr></thead><tbody>",
      ...parameters.map(
        (p) =>
          `<tr><td><code>${escapeHtml(p.name)}</code>${p.required ? "" : " (optional)"}</td><td>${escapeHtml(p.in)}</td><td><code>${escapeHtml(typeText(p.schema))}</code></td><td>${prose(p.description ?? "")}</td></tr>`,
      ),
      "</tbody></table>",
    );
  }
  const body = operation.requestBody?.content?.["application/json"]?.schema;
  if (body) parts.push("<h4>Request body</h4>", schemaBlock(body));
  for (const [status, response] of Object.entries(operation.responses ?? {})) {
    if (status === "default") continue;
    const schema = response.content?.["application/json"]?.schema;
    // "Default Response" is @fastify/swagger's filler, not a description.
    const note =
      response.description && response.description !== "Default Response"
        ? ` <span class="note">${prose(response.description)}</span>`
        : "";
    parts.push(`<h4>${escapeHtml(status)}${note}</h4>`);
    // Errors are all the same shape, shown once at the top of the page.
    if (schema && Object.keys(schema).length > 0 && schema.$ref !== "#/components/schemas/Error") parts.push(schemaBlock(schema));
  }
  parts.push("</section>");
  return parts.filter(Boolean).join("\n");
}

/** The whole page, from the OpenAPI document. */
export function renderDocsPage(document: Json): string {
  const info = (document.info ?? {}) as { title?: string; version?: string; description?: string };
  const components = (document.components ?? {}) as { securitySchemes?: Record<string, Json>; schemas?: Record<string, Json> };
  const schemes = components.securitySchemes ?? {};
  const byTag = new Map<string, string[]>();
  for (const [path, operations] of Object.entries((document.paths ?? {}) as Record<string, Record<string, Operation>>)) {
    for (const method of METHODS) {
      const operation = operations[method];
      if (!operation) continue;
      const tag = operation.tags?.[0] ?? "Other";
      byTag.set(tag, [...(byTag.get(tag) ?? []), operationHtml(method, path, operation)]);
    }
  }
  const title = `${info.title ?? "API"} ${info.version ?? ""} API reference`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/api/docs/style.css">
</head>
<body>
<main>
<h1>${escapeHtml(title)}</h1>
${(info.description ?? "")
  .split("\n\n")
  .map((paragraph) => `<p>${prose(paragraph)}</p>`)
  .join("\n")}
<p>The machine-readable document: <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1).</p>
<h2 id="credentials">Credentials</h2>
<dl>
${Object.entries(schemes)
  .map(([name, scheme]) => `<dt>${escapeHtml(credentialText([{ [name]: [] }]))}</dt><dd>${prose(String(scheme.description ?? ""))}</dd>`)
  .join("\n")}
</dl>
<h2 id="errors">Errors</h2>
${schemaBlock(components.schemas?.Error)}
<nav><h2>Contents</h2><ul>
${[...byTag.keys()].map((tag) => `<li><a href="#${anchor(tag)}">${escapeHtml(tag)}</a></li>`).join("\n")}
</ul></nav>
${[...byTag.entries()].map(([tag, operations]) => `<h2 id="${anchor(tag)}">${escapeHtml(tag)}</h2>\n${operations.join("\n")}`).join("\n")}
</main>
</body>
</html>
`;
}

export const DOCS_STYLESHEET = `body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: #1b1f24; background: #fff; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.25rem 4rem; }
h1 { font-size: 1.75rem; }
h2 { margin-top: 2.5rem; border-bottom: 1px solid #d0d7de; padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 0 0 .25rem; }
h4 { font-size: .95rem; margin: .75rem 0 .25rem; }
code, pre { font: 14px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: .75rem; overflow-x: auto; border-radius: 6px; }
.operation { border: 1px solid #d0d7de; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
.summary { font-weight: 600; margin: .25rem 0; }
.credential, .note { color: #57606a; font-size: .9rem; font-weight: normal; }
.method { display: inline-block; min-width: 4rem; text-align: center; border-radius: 4px; padding: 0 .4rem; color: #fff; background: #57606a; font-size: .85rem; }
.method-get { background: #0969da; }
.method-post { background: #1a7f37; }
.method-put, .method-patch { background: #9a6700; }
.method-delete { background: #cf222e; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; border-bottom: 1px solid #d0d7de; padding: .3rem .5rem; vertical-align: top; }
a { color: #0969da; }
@media (prefers-color-scheme: dark) {
  body { color: #e6edf3; background: #0d1117; }
  pre { background: #161b22; }
  .operation, h2, th, td { border-color: #30363d; }
  .credential, .note { color: #8d96a0; }
  a { color: #4493f8; }
}
`;
