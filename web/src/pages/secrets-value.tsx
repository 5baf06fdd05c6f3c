// A value in the grid (one clamped line, expandable in its own scrolling box, so revealing
// never moves the other rows) and the value editor (monospace; line numbers for PEM, JSON
// and anything else that spans lines).
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { CollapseIcon, ExpandIcon, MAX_VALUE_LENGTH } from "./secrets-common.tsx";

export function MaskedValue() {
  return (
    <span class="masked">
      <span aria-hidden="true">••••••••</span>
      <span class="sr-only">hidden</span>
    </span>
  );
}

/**
 * Clamped to its first line; when more is hidden (another line, or a line wider than the
 * column, measured as the column changes), a toggle expands it into a box of at most 12
 * lines that scrolls.
 */
export function RevealedValue({ name, value }: { name: string; value: string }) {
  const [expanded, setExpanded] = useState(false);
  const [overflows, setOverflows] = useState(false);
  const code = useRef<HTMLElement>(null);
  useLayoutEffect(() => {
    const el = code.current;
    if (!el) return;
    const measure = () => {
      if (el.classList.contains("clamped")) setOverflows(value.includes("\n") || el.scrollWidth > el.clientWidth + 1);
    };
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, [value]);
  return (
    <div class="value-line">
      {/* Focusable so the expanded box can be scrolled from the keyboard. */}
      <code ref={code} class={`value ${expanded ? "expanded" : "clamped"}`} tabIndex={0}>
        {value}
      </code>
      {(overflows || expanded) && (
        <button
          type="button"
          class="icon-button expand"
          aria-label={`${expanded ? "Less" : "More"} of ${name}`}
          aria-expanded={expanded ? "true" : "false"}
          title={expanded ? "Show one line" : "Show the whole value"}
          onClick={() => setExpanded(!expanded)}
        >
          {expanded ? <CollapseIcon /> : <ExpandIcon />}
        </button>
      )}
    </div>
  );
}

type ValueShape = "pem" | "json" | "lines" | "line";

export function shapeOf(value: string): ValueShape {
  const text = value.trim();
  if (/^-----BEGIN [A-Z0-9 ]+-----/.test(text)) return "pem";
  if (/^[[{]/.test(text)) {
    try {
      JSON.parse(text);
      return "json";
    } catch {
      // Not JSON after all: judged by its lines below.
    }
  }
  return value.includes("\n") ? "lines" : "line";
}

const SHAPE_NOTES: Record<ValueShape, string> = {
  pem: "PEM block: line breaks are kept exactly.",
  json: "JSON: valid.",
  lines: "Several lines: line breaks are kept exactly.",
  line: "",
};

/**
 * A monospace textarea; with `multiline`, a gutter of line numbers beside it (decorative:
 * the textarea is what assistive technology reads) that follows its scrolling.
 */
export function ValueEditor(props: { id: string; value: string; multiline: boolean; onInput(value: string): void; describedBy?: string }) {
  const gutter = useRef<HTMLPreElement>(null);
  const lines = props.value.split("\n").length;
  const shape = shapeOf(props.value);
  let note = SHAPE_NOTES[shape];
  if (shape !== "json" && /^\s*[[{]/.test(props.value) && props.multiline)
    note = "Starts like JSON but does not parse: check brackets and quotes.";
  const noteId = `${props.id}-shape`;
  // No maxLength: a browser cuts a longer paste to fit without a word, and a certificate
  // chain would be saved cut short. Too long is said here, and the server refuses it.
  const tooLong = props.value.length > MAX_VALUE_LENGTH;
  const lengthId = `${props.id}-length`;
  const describedBy = [props.describedBy, note ? noteId : undefined, tooLong ? lengthId : undefined].filter(Boolean).join(" ") || undefined;
  const textarea = (
    <textarea
      id={props.id}
      class="mono"
      required
      aria-invalid={tooLong || undefined}
      rows={props.multiline ? Math.min(Math.max(lines, 6), 18) : 2}
      wrap={props.multiline ? "off" : "soft"}
      value={props.value}
      aria-describedby={describedBy}
      onInput={(e) => props.onInput(e.currentTarget.value)}
      onScroll={(e) => {
        if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop;
      }}
      autoComplete="off"
      spellcheck={false}
    />
  );
  // One structure whether or not the gutter shows: switching must not remount the textarea
  // (typing the first line break would lose focus).
  return (
    <>
      <div class={props.multiline ? "code-editor" : "code-editor single"}>
        <pre class="gutter" ref={gutter} aria-hidden="true" hidden={!props.multiline}>
          {Array.from({ length: lines }, (_, i) => i + 1).join("\n")}
        </pre>
        {textarea}
      </div>
      {note && (
        <p id={noteId} class="muted small">
          {note}
        </p>
      )}
      {tooLong && (
        <p id={lengthId} class="error" role="alert">
          This value has {props.value.length.toLocaleString("en")} characters: a value has at most {MAX_VALUE_LENGTH.toLocaleString("en")}.
        </p>
      )}
    </>
  );
}
