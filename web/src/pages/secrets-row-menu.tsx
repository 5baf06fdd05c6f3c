// A row's less frequent actions behind one button, as WAI-ARIA's menu button pattern: the
// button opens the menu (Enter, Space, ArrowDown: first item; ArrowUp: last item), the arrow
// keys, Home and End move through it, Escape closes it and returns focus to the button, Tab
// or a click elsewhere closes it. Items are buttons, so Enter and Space choose one.
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { MoreIcon } from "./secrets-common.tsx";

export interface MenuItem {
  label: string;
  onSelect(): void;
  danger?: boolean;
}

let nextMenuId = 0;

export function RowMenu({ label, items }: { label: string; items: MenuItem[] }) {
  const [open, setOpen] = useState<false | "first" | "last">(false);
  const button = useRef<HTMLButtonElement>(null);
  const menu = useRef<HTMLDivElement>(null);
  const id = useRef(`row-menu-${++nextMenuId}`).current;

  const entries = () => [...(menu.current?.querySelectorAll<HTMLElement>('[role="menuitem"]') ?? [])];

  // A layout effect: focus moves before the next key is handled (an effect runs after paint,
  // and a quick ArrowDown would still reach the button).
  useLayoutEffect(() => {
    if (!open) return;
    const all = entries();
    (open === "last" ? all[all.length - 1] : all[0])?.focus();
    const away = (e: Event) => {
      const target = e.target as Node | null;
      if (target && !menu.current?.contains(target) && !button.current?.contains(target)) setOpen(false);
    };
    document.addEventListener("pointerdown", away);
    document.addEventListener("focusin", away);
    return () => {
      document.removeEventListener("pointerdown", away);
      document.removeEventListener("focusin", away);
    };
  }, [open]);

  function close(returnFocus: boolean) {
    setOpen(false);
    if (returnFocus) button.current?.focus();
  }

  function onMenuKey(e: KeyboardEvent) {
    const all = entries();
    const at = all.indexOf(document.activeElement as HTMLElement);
    const move = (to: number) => {
      e.preventDefault();
      all[(to + all.length) % all.length]?.focus();
    };
    if (e.key === "ArrowDown") move(at + 1);
    else if (e.key === "ArrowUp") move(at - 1);
    else if (e.key === "Home") move(0);
    else if (e.key === "End") move(all.length - 1);
    else if (e.key === "Escape") {
      e.preventDefault();
      close(true);
    } else if (e.key === "Tab") setOpen(false);
  }

  return (
    <span class="menu-wrap row-menu">
      <button
        type="button"
        ref={button}
        class="icon-button"
        aria-label={label}
        aria-haspopup="menu"
        aria-expanded={open ? "true" : "false"}
        aria-controls={id}
        onClick={() => setOpen(open ? false : "first")}
        onKeyDown={(e) => {
          if (e.key === "ArrowDown" || e.key === "ArrowUp") {
            e.preventDefault();
            setOpen(e.key === "ArrowUp" ? "last" : "first");
          }
        }}
      >
        <MoreIcon />
      </button>
      <div id={id} ref={menu} class="menu" role="menu" aria-label={label} hidden={!open} onKeyDown={onMenuKey}>
        {items.map((item) => (
          <button
            key={item.label}
            type="button"
            role="menuitem"
            tabIndex={-1}
            class={item.danger ? "danger-text" : undefined}
            onClick={() => {
              close(true);
              item.onSelect();
            }}
          >
            {item.label}
          </button>
        ))}
      </div>
    </span>
  );
}
