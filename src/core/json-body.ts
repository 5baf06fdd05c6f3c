// Response bodies as JSON, and the serializer every route's response schema goes through.
//
// Why not one JSON.stringify for every body: V8 builds a large result in pieces and joins
// them into a "large object" string, which lives on pages of its own, freshly mapped (the
// kernel zeroes each one on first touch); the socket then needs it flat, and flattening
// copies it once more. For a list of 1,000 secrets (155 KB) that was a millisecond of the
// server's CPU, more than the list's SQL. A body whose top level holds a long array (the
// API's envelopes: `{ secrets: [...] }`, `{ events: [...] }`) is written instead as slices
// of that array, each stringified on its own (small strings, short-lived), copied into one
// Buffer: the same bytes, at about a third of the cost. Everything else is one
// JSON.stringify, as before.
import { ResponseSerializationError } from "fastify-type-provider-zod";
import { $ZodType, safeEncode } from "zod/v4/core";

/** Items per JSON.stringify: a slice stays far below V8's large-object size (128 KiB) for the API's rows. */
const SLICE_ITEMS = 128;
/** Arrays shorter than this are stringified whole: slicing them gains nothing. */
const MIN_SLICED_ITEMS = 2 * SLICE_ITEMS;

/**
 * The bytes of JSON.stringify(value) in UTF-8: a Buffer when the top level is a plain
 * object holding a long array, else the string itself. (A toJSON method of an item in a
 * long array is called with the item's index within its slice, not the array: none of
 * ours reads it.)
 */
export function jsonBody(value: unknown): string | Buffer {
  if (!hasLongArray(value)) return JSON.stringify(value);
  const parts: string[] = [];
  for (const key of Object.keys(value)) {
    const item = value[key];
    if (Array.isArray(item) && item.length >= MIN_SLICED_ITEMS && !("toJSON" in item)) {
      parts.push(parts.length === 0 ? "{" : ",", JSON.stringify(key), ":[");
      for (let start = 0; start < item.length; start += SLICE_ITEMS) {
        const slice = JSON.stringify(item.slice(start, start + SLICE_ITEMS));
        if (start > 0) parts.push(",");
        parts.push(slice.slice(1, -1));
      }
      parts.push("]");
      continue;
    }
    // As JSON.stringify does: a property whose value JSON cannot hold (undefined, a function) is left out.
    const text = JSON.stringify(item) as string | undefined;
    if (text === undefined) continue;
    parts.push(parts.length === 0 ? "{" : ",", JSON.stringify(key), ":", text);
  }
  parts.push(parts.length === 0 ? "{}" : "}");
  let length = 0;
  for (const part of parts) length += Buffer.byteLength(part, "utf8");
  const body = Buffer.allocUnsafe(length);
  let offset = 0;
  for (const part of parts) offset += body.write(part, offset, "utf8");
  // allocUnsafe's memory may hold an earlier response: never send a byte not written here.
  return offset === length ? body : JSON.stringify(value);
}

/** A plain object (no toJSON of its own) with at least one long array among its own values. */
function hasLongArray(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  if ("toJSON" in value) return false;
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (Array.isArray(item) && item.length >= MIN_SLICED_ITEMS && !("toJSON" in item)) return true;
  }
  return false;
}

/**
 * fastify-type-provider-zod's serializer compiler with jsonBody for the text: the response
 * is encoded with its route's schema (an answer that does not fit it is an error, as with
 * the library's), then written.
 */
export function serializerCompiler({ schema, method, url }: { schema: unknown; method: string; url: string }) {
  const zodSchema = resolveSchema(schema);
  return (data: unknown): string => {
    const result = safeEncode(zodSchema, data);
    if (result.error) throw new ResponseSerializationError(method, url, { cause: result.error });
    // Fastify sends a Buffer as it is; its serializer type says string only.
    return jsonBody(result.data) as string;
  };
}

/** A route's response schema: a zod type, or the `{ properties }` wrapper some Fastify paths give. */
function resolveSchema(schema: unknown): $ZodType {
  if (schema instanceof $ZodType) return schema;
  const properties = (schema as { properties?: unknown } | null)?.properties;
  if (properties instanceof $ZodType) return properties;
  throw new Error(`a response schema is not a zod type: ${JSON.stringify(schema)}`);
}
