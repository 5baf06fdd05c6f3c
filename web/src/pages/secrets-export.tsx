// Downloads of the whole environment through the export endpoint (audited as secrets.exported).
import { useEffect, useRef, useState } from "preact/hooks";
import { type Environment, envPath, type Project, request } from "../api.ts";
import { useAction, whileBusy } from "../ui.tsx";

/** Saves text as a file through a temporary object URL. */
export function saveFile(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.download = name;
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

type ExportChoice = "dotenv" | "shell" | "docker" | "json" | "yaml";

/** The download menu's entries: the API's format, the label and the file's extension. */
const EXPORT_CHOICES: { format: ExportChoice; label: string; extension: string; type: string }[] = [
  { format: "dotenv", label: "Download .env", extension: "", type: "text/plain" },
  { format: "shell", label: "Download shell script", extension: "sh", type: "text/x-shellscript" },
  { format: "docker", label: "Download Docker env file", extension: "env", type: "text/plain" },
  { format: "json", label: "Download JSON", extension: "json", type: "application/json" },
  { format: "yaml", label: "Download YAML", extension: "yaml", type: "application/yaml" },
];

/**
 * "Export" opens a short list of downloads (a disclosure: Tab and the arrow keys move through
 * it, Escape closes it and returns to the button, focus or a click elsewhere closes it).
 */
export function ExportButtons({ project, env, onStart }: { project: Project; env: Environment; onStart(): void }) {
  const action = useAction();
  const [open, setOpen] = useState(false);
  const [which, setWhich] = useState<ExportChoice | undefined>(undefined);
  const [notice, setNotice] = useState("");
  const toggle = useRef<HTMLButtonElement>(null);
  const menu = useRef<HTMLUListElement>(null);
  const menuId = "export-menu";
  useEffect(() => {
    if (!open) return;
    menu.current?.querySelector("button")?.focus();
    const away = (e: Event) => {
      const target = e.target as Node | null;
      if (target && !menu.current?.contains(target) && !toggle.current?.contains(target)) setOpen(false);
    };
    document.addEventListener("pointerdown", away);
    document.addEventListener("focusin", away);
    return () => {
      document.removeEventListener("pointerdown", away);
      document.removeEventListener("focusin", away);
    };
  }, [open]);
  if (!project.permissions.includes("secrets:read")) return null;

  function onMenuKey(e: KeyboardEvent) {
    const items = [...(menu.current?.querySelectorAll("button") ?? [])];
    const at = items.indexOf(document.activeElement as HTMLButtonElement);
    if (e.key === "Escape") {
      e.preventDefault();
      setOpen(false);
      toggle.current?.focus();
    } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      items[(at + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length]?.focus();
    } else if (e.key === "Home" || e.key === "End") {
      e.preventDefault();
      items[e.key === "Home" ? 0 : items.length - 1]?.focus();
    }
  }

  async function download(choice: (typeof EXPORT_CHOICES)[number]) {
    onStart();
    setOpen(false);
    toggle.current?.focus();
    setWhich(choice.format);
    setNotice("");
    await action.run(async () => {
      const res = await request("GET", `${envPath(project.id, env)}/export${choice.format === "json" ? "" : `?format=${choice.format}`}`);
      const name =
        choice.format === "dotenv" ? `.env.${env}` : `${project.name.replace(/[^A-Za-z0-9._-]+/g, "-")}.${env}.${choice.extension}`;
      saveFile(name, await res.text(), choice.type);
      const leftOut = Number(res.headers.get("x-secrets-left-out") ?? "0");
      if (leftOut > 0)
        setNotice(
          `${leftOut} secret${leftOut === 1 ? " is" : "s are"} left out of ${name}: a comment in the file says why. The JSON export has every value.`,
        );
    });
    setWhich(undefined);
  }
  const note = "Exports contain every value of this environment in plain text; each export is recorded in the audit log.";
  return (
    <>
      <span class="menu-wrap">
        <button
          type="button"
          ref={toggle}
          title={note}
          aria-expanded={open ? "true" : "false"}
          aria-controls={menuId}
          {...whileBusy(action.busy, () => setOpen(!open))}
          onKeyDown={(e) => {
            if (e.key === "ArrowDown" && !open && !action.busy) {
              e.preventDefault();
              setOpen(true);
            }
          }}
        >
          {action.busy && which ? "Exporting…" : "Export"} <span aria-hidden="true">▾</span>
        </button>
        <ul id={menuId} ref={menu} class="menu" hidden={!open} onKeyDown={onMenuKey}>
          {EXPORT_CHOICES.map((choice) => (
            <li key={choice.format}>
              <button type="button" title={note} {...whileBusy(action.busy, () => void download(choice))}>
                {choice.label}
              </button>
            </li>
          ))}
        </ul>
      </span>
      {/* Always in the page: a status region inserted together with its text is often not announced. */}
      <span class="muted small" role="status">
        {notice}
      </span>
      {action.error && (
        <span class="error-text" role="alert">
          {action.error}
        </span>
      )}
    </>
  );
}
