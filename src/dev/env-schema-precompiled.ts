// The executable's env-schema, compiled by the build (build.mjs bundles this module's output
// where src/core/config.ts imports env-schema); from source, env-schema itself runs.
//
// env-schema compiles JSON Schema's meta-schema with Ajv as it loads and our schema at its
// first call: 50-60 ms of a 300 ms start of the executable (CPU profile of `serve`), code
// generated at run time, which V8's code cache cannot keep. Here the same Ajv, made with
// env-schema's own options (coercion, defaults, removal of unknown variables, every error),
// compiles the schema once at build time into standalone code (Ajv's standaloneCode), and
// the stand-in wraps it as env-schema wraps its validator: the same merge, result and
// error. test/config.test.ts compares the two on every kind of input.

import { createRequire } from "node:module";
import { envSchema } from "env-schema";

/** What is used of the Ajv instance env-schema makes. */
interface Ajv {
  opts: { code: { source?: boolean } };
  compile(schema: object): unknown;
}

// The schema's text as both sides compare it: env-schema adds additionalProperties: false
// to the object it is given. JavaScript, as the stand-in runs it too.
const SCHEMA_TEXT_FUNCTION = "function schemaText(schema) { return JSON.stringify({ ...schema, additionalProperties: false }); }";
const schemaText = new Function(`return ${SCHEMA_TEXT_FUNCTION}`)() as (schema: object) => string;

/** The source of a CommonJS module that exports `envSchema` (and `default`), for `schema` only. */
export function precompiledEnvSchema(schema: object): string {
  const copy = structuredClone(schema);
  let ajv: Ajv | undefined;
  envSchema({
    schema: copy,
    data: {},
    env: false,
    dotenv: false,
    // env-schema's own instance, asked to keep what it compiles as source for standaloneCode.
    ajv: {
      customOptions(instance) {
        instance.opts.code.source = true;
        ajv = instance;
        return instance;
      },
    },
  });
  if (!ajv) throw new Error("env-schema did not hand over its Ajv instance.");
  // The Ajv env-schema depends on, whichever copy that is.
  const ajvRequire = createRequire(createRequire(import.meta.url).resolve("env-schema"));
  const { default: standaloneCode } = ajvRequire("ajv/dist/standalone") as { default: (ajv: Ajv, validate: unknown) => string };
  // The function env-schema compiled for the copy it made additionalProperties: false.
  const validator = standaloneCode(ajv, ajv.compile(copy));
  return `${validator}
const precompiledValidate = module.exports;
const SCHEMA_TEXT = ${JSON.stringify(schemaText(schema))};
${SCHEMA_TEXT_FUNCTION}
function envSchema(opts) {
  if (schemaText(opts.schema) !== SCHEMA_TEXT) throw new Error("env-schema was compiled by the build for another schema.");
  if (opts.env !== false || opts.dotenv !== false) throw new Error("The built env-schema reads only the data it is given.");
  const merged = Object.assign({}, ...[].concat(opts.data));
  if (!precompiledValidate(merged)) {
    const errors = precompiledValidate.errors;
    const error = new Error(errors.map((e) => "env" + e.instancePath + " " + e.message).join(", "));
    error.errors = errors;
    throw error;
  }
  return merged;
}
module.exports = { envSchema, default: envSchema };
`;
}
