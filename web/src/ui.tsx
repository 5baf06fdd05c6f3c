// Small shared pieces: links, loading data, running actions with progress and the API's
// error message, dialogs, form and table buttons, tables, times.
import type { AnchorHTMLAttributes, ButtonHTMLAttributes, ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api.ts";
import { onLinkClick } from "./router.ts";

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  // biome-ignore lint/a11y: a real link (its href is in props); the router only takes over the plain click
  return <a {...props} onClick={onLinkClick} />;
}

export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): Promise<void>;
  setData(data: T): void;
}

/** Loads data when deps change; reload() fetches again. Stale answers are dropped. */
/**
 * `keepWhileLoading`: when the deps change, what was loaded stays shown (and mounted, so the
 * control that changed them keeps the focus) until the new answer replaces it; `loading`
 * says it is stale meanwhile.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], { keepWhileLoading = false } = {}): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setLoading(true);
    try {
      const value = await load();
      if (mine === generation.current) {
        setData(value);
        setError(undefined);
      }
    } catch (e) {
      if (mine === generation.current) setError(e);
    } finally {
      if (mine === generation.current) setLoading(false);
    }
    // The caller names what the loader depends on, like useEffect's list.
  }, deps);
  useEffect(() => {
    if (!keepWhileLoading) setData(undefined);
    void reload();
  }, [reload]);
  // Data set by an action (a PUT's answer, a disconnect) is newer than any load still in
  // flight: that load's answer is dropped, or it would bring back what the action replaced.
  const replace = useCallback((value: T) => {
    generation.current++;
    setData(value);
    setError(undefined);
    setLoading(false);
  }, []);
  return { data, error, loading, reload, setData: replace };
}

let nextPageNotice: string | undefined;

/** A message for the page an action leads to ("Project … was deleted."): set it, then navigate. */
export function setNextPageNotice(message: string): void {
  nextPageNotice = message;
}

/** The next page's notice, once: read after mount, so its role=status region announces it. */
export function useNextPageNotice(): string {
  const [notice, setNotice] = useState("");
  useEffect(() => {
    const message = nextPageNotice;
    nextPageNotice = undefined;
    if (message) setNotice(message);
  }, []);
  return notice;
}

export interface Action {
  busy: boolean;
  error: string | undefined;
  errorStatus: number | undefined;
  run<T>(fn: () => Promise<T>): Promise<T | undefined>;
  clear(): void;
}

/** Runs one user action at a time, exposing progress and the API's message on failure. */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const [errorStatus, setErrorStatus] = useState<number | undefined>(undefined);
  const run = useCallback(async <T,>(fn: () => Promise<T>) => {
    setBusy(true);
    setError(undefined);
    setErrorStatus(undefined);
    try {
      return await fn();
    } catch (e) {
      setError(messageOf(e));
      setErrorStatus(e instanceof ApiError ? e.status : undefined);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  const clear = useCallback(() => {
    setError(undefined);
    setErrorStatus(undefined);
  }, []);
  return { busy, error, errorStatus, run, clear };
}

export function ErrorText({ error, children }: { error?: string | undefined; children?: ComponentChildren }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      <span>{error}</span>
      {children}
    </div>
  );
}

export function LoadState<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  const retry = (
    <button type="button" class="link" onClick={() => void loaded.reload()}>
      Try again
    </button>
  );
  // What was shown is gone or no longer ours to see: the answer replaces it.
  const gone = loaded.error instanceof ApiError && [401, 403, 404, 410].includes(loaded.error.status);
  if (loaded.data === undefined || gone) {
    if (loaded.error) return <ErrorText error={messageOf(loaded.error)}>{retry}</ErrorText>;
    return (
      <p class="muted" role="status">
        Loading…
      </p>
    );
  }
  // A refresh that failed (a rate limit, a dropped connection) says so above what was shown,
  // and unmounts nothing: a dialog holding a token shown only once stays open.
  return (
    <>
      {loaded.error !== undefined && <ErrorText error={`Could not refresh: ${messageOf(loaded.error)}`}>{retry}</ErrorText>}
      {children(loaded.data)}
    </>
  );
}

/**
 * A modal dialog on the native <dialog>: focus moves in, Escape closes, focus returns. While
 * `busy` (its request on the way) it does not close: closing would not stop the request, and
 * would lose its answer (a token shown once).
 */
export function Dialog(props: {
  title: string;
  onClose(): void;
  children: ComponentChildren;
  drawer?: boolean;
  wide?: boolean;
  busy?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  // Captured at the first render, not in the effect: effects run after paint, and by then
  // something else may hold focus.
  const opener = useRef(document.activeElement as HTMLElement | null).current;
  // Read by the close listener, which outlives the render it was made in.
  const busy = useRef(false);
  busy.current = props.busy === true;
  const mounted = useRef(true);
  useEffect(() => {
    const dialog = ref.current!;
    dialog.showModal();
    return () => {
      mounted.current = false;
      dialog.close();
      // The opener may be gone with its row (a deleted secret, a revoked session): the
      // page's main region takes focus rather than leaving it nowhere.
      if (opener?.isConnected) opener.focus();
      else document.getElementById("main")?.focus();
    };
  }, []);
  const titleId = useRef(`dialog-${Math.random().toString(36).slice(2)}`).current;
  return (
    <dialog
      ref={ref}
      class={props.drawer ? "drawer" : props.wide ? "wide" : undefined}
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        if (!busy.current) props.onClose();
      }}
      // Chromium lets only the first Escape since a click be held back by cancel: a second
      // one closes the dialog all the same. While busy it opens again at once.
      onClose={() => {
        if (mounted.current && busy.current) ref.current?.showModal();
      }}
    >
      <header class="dialog-head">
        <h2 id={titleId}>{props.title}</h2>
        <button type="button" class="icon" aria-label="Close" {...whileBusy(props.busy, props.onClose)}>
          ×
        </button>
      </header>
      <div class="dialog-body">{props.children}</div>
    </dialog>
  );
}

interface SubmitProps {
  label: string;
  /** Shown instead of `label` while `busy` ("Saving…"). */
  busyLabel: string;
  busy: boolean;
  disabled?: boolean;
  /**
   * Not available yet (nothing to save), but keeps keyboard focus: aria-disabled rather than
   * disabled, and a click or Enter in a field submits nothing.
   */
  unavailable?: boolean;
  danger?: boolean;
}

/**
 * A button's props while its action may run, or while it has nothing to act on yet (as
 * SubmitButton's `unavailable`): then it is aria-disabled and a press does nothing. Not `disabled`, which drops the keyboard focus of whoever pressed it to the page's
 * start, where they would have to find their place again. `disabled` stays for a button that
 * cannot apply at all.
 */
export function whileBusy(busy: boolean | undefined, onClick?: (event: MouseEvent) => void) {
  return {
    "aria-disabled": busy ? ("true" as const) : undefined,
    onClick: busy ? (event: MouseEvent) => event.preventDefault() : onClick,
  };
}

/** A form's submit button: no second click while the first one's request runs (see whileBusy). */
export function SubmitButton({ label, busyLabel, busy, disabled, unavailable, danger }: SubmitProps) {
  return (
    // Enter in a field submits through a click on this button too, so whileBusy stops both.
    <button type="submit" class={danger ? "danger" : "primary"} disabled={Boolean(disabled)} {...whileBusy(busy || unavailable)}>
      {busy ? busyLabel : label}
    </button>
  );
}

/** A form's row of buttons: submit, then Cancel when the form sits in a dialog. */
export function FormActions({ onCancel, ...submit }: SubmitProps & { onCancel?(): void }) {
  return (
    <div class="actions">
      <SubmitButton {...submit} />
      {onCancel && (
        // Not while the request runs: cancelling would not stop it (see Dialog).
        <button type="button" {...whileBusy(submit.busy, onCancel)}>
          Cancel
        </button>
      )}
    </div>
  );
}

interface ConfirmProps {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  typed?: string;
  onConfirm(): Promise<unknown>;
  onClose(): void;
}

/** A confirmation dialog; with `typed`, the user must type that word to confirm. */
export function Confirm(props: ConfirmProps) {
  const action = useAction();
  const [typed, setTyped] = useState("");
  const ready = !props.typed || typed === props.typed;
  return (
    <Dialog title={props.title} onClose={props.onClose} busy={action.busy}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (!ready) return;
          const done = await action.run(async () => {
            await props.onConfirm();
            return true;
          });
          if (done) props.onClose();
        }}
      >
        {props.children}
        {props.typed && (
          <label class="field">
            <span>
              Type <strong>{props.typed}</strong> to confirm
            </span>
            <input value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" spellcheck={false} />
          </label>
        )}
        <ErrorText error={action.error} />
        <FormActions
          label={props.confirmLabel}
          busyLabel="Working…"
          busy={action.busy}
          disabled={!ready}
          danger={props.danger}
          onCancel={props.onClose}
        />
      </form>
    </Dialog>
  );
}

/**
 * A card for one action that cannot be undone: `text` says what it does, the button opens
 * a confirmation (children are its body).
 */
export function DangerZone(
  props: { title: string; text: string; button: string; confirmTitle: string } & Omit<ConfirmProps, "title" | "danger" | "onClose">,
) {
  const { title, text, button, confirmTitle, ...confirm } = props;
  const [confirming, setConfirming] = useState(false);
  return (
    <>
      <div class="card danger-zone">
        <h3>{title}</h3>
        <p>{text}</p>
        <button type="button" class="danger" onClick={() => setConfirming(true)}>
          {button}
        </button>
      </div>
      {confirming && <Confirm {...confirm} title={confirmTitle} danger onClose={() => setConfirming(false)} />}
    </>
  );
}

/**
 * A button in a table row. `label` is its accessible name where the short text alone
 * ("Delete") would not say which row it acts on ("Delete API_KEY").
 */
export function RowButton({
  label,
  danger,
  ...button
}: Omit<ButtonHTMLAttributes<HTMLButtonElement>, "type" | "class" | "label"> & { label?: string; danger?: boolean }) {
  return <button {...button} type="button" class={danger ? "danger-text" : undefined} aria-label={label} />;
}

/**
 * A table in its scrolling wrapper, one header cell per column. With `actions`, a last
 * column holds the rows' buttons; its header is named "Actions" for screen readers only.
 */
export function DataTable(props: {
  columns: string[];
  actions?: boolean;
  class?: string;
  caption?: ComponentChildren;
  children: ComponentChildren;
}) {
  return (
    <div class="table-wrap">
      <table class={props.class}>
        {props.caption !== undefined && <caption class="sr-only">{props.caption}</caption>}
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th scope="col" key={column}>
                {column}
              </th>
            ))}
            {props.actions && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const dateTimeSeconds = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const fullTime = new Intl.DateTimeFormat(undefined, {
  weekday: "long",
  year: "numeric",
  month: "long",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  fractionalSecondDigits: 3,
  timeZoneName: "short",
});

export function formatTime(iso: string | undefined | null, seconds = false): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : (seconds ? dateTimeSeconds : dateTime).format(date);
}

/** `seconds` for logs, where the order of nearby events matters; the hover shows the full time. */
export function Time({ iso, seconds }: { iso: string | undefined | null; seconds?: boolean }) {
  if (!iso) return <span class="muted">—</span>;
  const date = new Date(iso);
  const title = Number.isNaN(date.getTime()) ? iso : `${fullTime.format(date)} (${iso})`;
  return (
    <time dateTime={iso} title={title}>
      {formatTime(iso, seconds)}
    </time>
  );
}

/**
 * Puts text on the clipboard, `read` once if it has to be fetched first (a reveal, audited).
 * Safari allows a clipboard write only while the click's user activation lasts, which the
 * fetch outlives: a ClipboardItem given the fetch as a promise is written as soon as it
 * arrives. Where ClipboardItem is missing or refuses, the text is written when it is there.
 */
export async function copyText(read: string | (() => Promise<string> | string)): Promise<void> {
  if (typeof read === "string") return navigator.clipboard.writeText(read);
  const value = Promise.resolve(read());
  if (typeof ClipboardItem !== "undefined" && typeof navigator.clipboard.write === "function") {
    try {
      await navigator.clipboard.write([
        new ClipboardItem({ "text/plain": value.then((text) => new Blob([text], { type: "text/plain" })) }),
      ]);
      return;
    } catch {
      // A value that could not be read fails the copy (rejects here); the clipboard refusing
      // the item only sends the text the other way.
      await value;
    }
  }
  await navigator.clipboard.writeText(await value);
}

export type CopyState = "idle" | "copying" | "copied" | "failed";

/**
 * A copy button's state and its click: "copying" while the text is read and written (a
 * click meanwhile does nothing, so a double click is one reveal), then "copied" or "failed"
 * for 2 s. `onStart` runs as the copy begins (to clear an earlier action's message).
 */
export function useCopy(
  text: string | (() => Promise<string> | string),
  onStart?: () => void,
  /** Why it failed (the API's message, or the clipboard's refusal), for a message the page shows. */
  onFailed?: (message: string) => void,
): [CopyState, () => Promise<void>] {
  const [state, setState] = useState<CopyState>("idle");
  const timer = useRef<ReturnType<typeof setTimeout>>(undefined);
  const busy = useRef(false);
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
      clearTimeout(timer.current);
    },
    [],
  );
  const copy = async () => {
    if (busy.current) return;
    busy.current = true;
    onStart?.();
    clearTimeout(timer.current);
    setState("copying");
    let done: CopyState = "copied";
    try {
      await copyText(text);
    } catch (e) {
      done = "failed";
      if (mounted.current) onFailed?.(messageOf(e));
    }
    busy.current = false;
    if (!mounted.current) return;
    setState(done);
    timer.current = setTimeout(() => setState("idle"), 2000);
  };
  return [state, copy];
}

/** `what` names the copied thing for screen readers ("Copy DATABASE_URL", then "Copied DATABASE_URL"). */
export function CopyButton({
  text,
  label = "Copy",
  what,
  onStart,
}: {
  text: string | (() => Promise<string> | string);
  label?: string;
  what?: string;
  onStart?(): void;
}) {
  const [state, copy] = useCopy(text, onStart);
  return (
    <button type="button" onClick={copy}>
      {state === "copying" ? "Copying…" : state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : label}
      {what && <span class="sr-only"> {what}</span>}
    </button>
  );
}

export function envLabel(env: string): string {
  return env.charAt(0).toUpperCase() + env.slice(1);
}

export function whoLabel(who: { email?: string | null; isYou: boolean; isMember?: boolean } | null | undefined): string {
  if (!who) return "system";
  if (who.isYou) return "you";
  const name = who.email ?? "a former member";
  return who.isMember === false ? `${name} (no longer a member)` : name;
}

/** The page's main region: the skip link's target, and where focus goes when a row it was on is gone. */
export function Main({ children }: { children: ComponentChildren }) {
  return (
    <main id="main" tabIndex={-1}>
      {children}
    </main>
  );
}

/**
 * The page's own heading: in a project, its section's (the project's name above it stays the
 * same from section to section), and none until the section has drawn it; elsewhere the h1.
 */
function mainHeading(): HTMLElement | null {
  const body = document.querySelector("#main .project-body");
  if (body) return body.querySelector<HTMLElement>("h2");
  return document.querySelector<HTMLElement>("#main h1");
}

/**
 * After a navigation, focus moves to the new page's heading, as a page load would read from
 * the top: unless the page already put it somewhere (a new account's heading, a dialog).
 * The heading may come only once the page's data has loaded, so it is awaited a moment.
 */
export function useFocusOnNavigation(visit: number): void {
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const unclaimed = () => {
      const active = document.activeElement;
      return !active || active === document.body || !active.isConnected || active.id === "main" || active.closest("nav") !== null;
    };
    const focusHeading = (): boolean => {
      const heading = mainHeading();
      if (!heading) return false;
      if (unclaimed()) {
        if (!heading.hasAttribute("tabindex")) heading.setAttribute("tabindex", "-1");
        heading.focus({ preventScroll: true });
      }
      return true;
    };
    if (focusHeading()) return;
    const observer = new MutationObserver(() => {
      if (focusHeading()) observer.disconnect();
    });
    observer.observe(document.body, { childList: true, subtree: true });
    const stop = setTimeout(() => observer.disconnect(), 5000);
    return () => {
      observer.disconnect();
      clearTimeout(stop);
    };
  }, [visit]);
}

/**
 * The heading of a view that replaces the form whose button had the focus (an accepted
 * invitation, an approved sign-in): it takes the focus, so the keyboard and a screen reader
 * go on from the outcome instead of from the top of the page.
 */
export function OutcomeHeading({ children, level = 1 }: { children: ComponentChildren; level?: 1 | 3 }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const Tag = level === 1 ? "h1" : "h3";
  return (
    <Tag ref={heading} tabIndex={-1}>
      {children}
    </Tag>
  );
}
