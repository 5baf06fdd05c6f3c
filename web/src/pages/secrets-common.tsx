// Pieces the secrets pages share: the key rule, the audit note, a key that wraps only at
// its underscores, and the grid's icons.
import { type ComponentChildren, Fragment } from "preact";
import { hasKeyShape, isSecretKey, isWellFormedText, MAX_VALUE_UNITS, SECRET_NOT_FOUND } from "../../../src/core/secret-rules.ts";
import { ApiError } from "../api.ts";

export {
  hasKeyShape,
  isSecretKey,
  isWellFormedText,
  MAX_KEY_LENGTH,
  MAX_VALUE_UNITS as MAX_VALUE_LENGTH,
} from "../../../src/core/secret-rules.ts";

const KEY_RULE = "Keys use letters, digits and underscores and do not start with a digit.";
export const KEY_LOOKS_LIKE_TOKEN = "A key may not look like one of this server's tokens (svc_…).";

/** Why the server would refuse a key, or undefined: what every form that takes a key marks invalid before sending. */
export function keyProblem(key: string): string | undefined {
  if (!hasKeyShape(key)) return KEY_RULE;
  if (!isSecretKey(key)) return KEY_LOOKS_LIKE_TOKEN;
  return undefined;
}

/** Why the server would refuse a key and value (a non-empty one), or undefined: what the import preview and the paste view mark invalid. */
export function entryProblem({ key, value }: { key: string; value: string }): string | undefined {
  const problem = keyProblem(key);
  if (problem) return problem;
  if (value.length > MAX_VALUE_UNITS) return "Values can be at most 10,000 characters.";
  if (!isWellFormedText(value)) return "The value holds half of a character (a lone surrogate).";
  return undefined;
}

/** The secret itself is gone, deleted elsewhere (a 404 for the project, when the caller was removed, is not this). */
export function isSecretGone(e: unknown): boolean {
  return e instanceof ApiError && e.status === 404 && e.message === SECRET_NOT_FOUND;
}

export const REVEAL_NOTE = "Reading a value is recorded in the project's audit log under your name.";

/**
 * A key with a line-break opportunity after each underscore and nowhere else (CSS keeps
 * words whole): AWS_SECRET_ACCESS_KEY breaks as AWS_ SECRET_ ACCESS_ KEY, never mid-word.
 */
export function KeyName({ name }: { name: string }) {
  const parts = name.split(/(?<=_)/);
  return (
    <code class="key">
      {parts.map((part, i) => (
        <Fragment key={i}>
          {part}
          {i < parts.length - 1 && <wbr />}
        </Fragment>
      ))}
    </code>
  );
}

/** Icons are decorative: every icon button carries its own accessible name. */
function Svg({ children }: { children: ComponentChildren }) {
  return (
    <svg class="icon-svg" viewBox="0 0 16 16" width="16" height="16" aria-hidden="true" focusable="false">
      {children}
    </svg>
  );
}

export const EyeIcon = () => (
  <Svg>
    <path
      fill="currentColor"
      d="M8 3C4.4 3 1.7 5.4.5 8c1.2 2.6 3.9 5 7.5 5s6.3-2.4 7.5-5C14.3 5.4 11.6 3 8 3Zm0 8.5A3.5 3.5 0 1 1 8 4.5a3.5 3.5 0 0 1 0 7Zm0-5.5a2 2 0 1 0 0 4 2 2 0 0 0 0-4Z"
    />
  </Svg>
);

export const EyeOffIcon = () => (
  <Svg>
    <path
      fill="currentColor"
      d="M2.1 1 1 2.1l2.2 2.2C2 5.2 1.1 6.5.5 8c1.2 2.6 3.9 5 7.5 5 1.3 0 2.5-.3 3.6-.9l2.3 2.3 1.1-1.1L2.1 1Zm5.9 10.5A3.5 3.5 0 0 1 4.6 7l1.2 1.2a2 2 0 0 0 2 2l1.2 1.2c-.3 0-.6.1-1 .1ZM8 3c3.6 0 6.3 2.4 7.5 5-.5 1.1-1.2 2.1-2.1 2.9l-2-2c.1-.3.1-.6.1-.9A3.5 3.5 0 0 0 8 4.5c-.3 0-.6 0-.9.1L5.6 3.3C6.4 3.1 7.2 3 8 3Z"
    />
  </Svg>
);

export const CopyIcon = () => (
  <Svg>
    <path
      fill="currentColor"
      d="M5 1h8a2 2 0 0 1 2 2v8h-1.5V3a.5.5 0 0 0-.5-.5H5V1ZM3 4h7a2 2 0 0 1 2 2v7a2 2 0 0 1-2 2H3a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2Zm0 1.5a.5.5 0 0 0-.5.5v7a.5.5 0 0 0 .5.5h7a.5.5 0 0 0 .5-.5V6a.5.5 0 0 0-.5-.5H3Z"
    />
  </Svg>
);

export const CheckIcon = () => (
  <Svg>
    <path fill="currentColor" d="M6.2 11.4 2.8 8l-1.1 1.1 4.5 4.5 8.1-8.1-1.1-1.1z" />
  </Svg>
);

export const MoreIcon = () => (
  <Svg>
    <path
      fill="currentColor"
      d="M3 9.5a1.5 1.5 0 1 1 0-3 1.5 1.5 0 0 1 0 3Zm5 0a1.5 1.5 0 1 1 0-3 1.5 1.5 0 0 1 0 3Zm5 0a1.5 1.5 0 1 1 0-3 1.5 1.5 0 0 1 0 3Z"
    />
  </Svg>
);

export const ExpandIcon = () => (
  <Svg>
    <path fill="currentColor" d="M8 10.6 3.4 6l1.1-1.1L8 8.4l3.5-3.5L12.6 6z" />
  </Svg>
);

export const CollapseIcon = () => (
  <Svg>
    <path fill="currentColor" d="M8 5.4 12.6 10l-1.1 1.1L8 7.6l-3.5 3.5L3.4 10z" />
  </Svg>
);
