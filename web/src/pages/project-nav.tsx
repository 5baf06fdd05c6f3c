// The project's navigation: its sections (a side column on wide screens, a disclosure menu
// on phones) and, apart from them, the switcher between the environments of the secrets.
import { useEffect, useRef, useState } from "preact/hooks";
import type { Environment } from "../api.ts";
import { useLocation } from "../router.ts";
import { envLabel, Link } from "../ui.tsx";

export interface NavItem {
  href: string;
  label: string;
  current: boolean;
}

/**
 * One list of links for both widths: CSS shows it as a column beside the page on wide
 * screens and hides it behind the "Sections" button on phones, so the page itself (the
 * first secret) starts near the top of a phone's screen.
 */
export function ProjectNav({ items }: { items: NavItem[] }) {
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const current = items.find((item) => item.current);
  const currentHref = current?.href;
  // A link followed closes the menu: the next page starts with it folded.
  useEffect(() => setOpen(false), [currentHref]);
  return (
    <nav
      class="side-nav"
      aria-label="Project"
      onKeyDown={(e) => {
        if (e.key === "Escape" && open) {
          setOpen(false);
          button.current?.focus();
        }
      }}
    >
      <button
        ref={button}
        type="button"
        class="sections-button"
        aria-expanded={open}
        aria-controls="project-sections"
        onClick={() => setOpen(!open)}
      >
        <span>
          Sections<span class="sr-only">, current:</span> <strong>{current?.label ?? ""}</strong>
        </span>
        <span aria-hidden="true">{open ? "▴" : "▾"}</span>
      </button>
      <ul id="project-sections" class={open ? "open" : undefined}>
        {items.map((item) => (
          <li key={item.href}>
            <Link href={item.href} aria-current={item.current ? "page" : undefined} onClickCapture={() => setOpen(false)}>
              {item.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/**
 * A segmented control of links: each environment's secrets keep their own address. The view
 * (one environment, or across environments from this one) stays as it is.
 */
export function EnvironmentSwitcher({ base, environments, current }: { base: string; environments: Environment[]; current: Environment }) {
  const view = useLocation().search.get("view");
  if (environments.length < 2) return null;
  const query = view ? `?${new URLSearchParams({ view })}` : "";
  return (
    <nav class="env-switch" aria-label="Environments">
      {environments.map((env) => (
        <Link key={env} href={`${base}/${env}${query}`} aria-current={env === current ? "page" : undefined}>
          {envLabel(env)}
        </Link>
      ))}
    </nav>
  );
}
