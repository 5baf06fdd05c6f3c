// A tiny router on history.pushState: the URL is the state, components re-render on change.
import { useEffect, useState } from "preact/hooks";

export interface Location {
  pathname: string;
  search: URLSearchParams;
  hash: string;
  /**
   * Counts the pages the person went to (a link, the back button): a page opened again,
   * even at the same address, loads afresh and takes focus. Redirects (`replace`) and
   * filter changes (`keepScroll`) are not visits.
   */
  visit: number;
}

const listeners = new Set<() => void>();
let visit = 0;
/** The page (path and query) last shown: a move to a fragment only (the skip link) is no visit. */
let shown = window.location.pathname + window.location.search;

function current(): Location {
  return { pathname: window.location.pathname, search: new URLSearchParams(window.location.search), hash: window.location.hash, visit };
}

/** `keepScroll`: the same page with other query parameters (filters), not a new page. */
export function navigate(to: string, options: { replace?: boolean; keepScroll?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  if (!options.replace && !options.keepScroll) visit++;
  shown = window.location.pathname + window.location.search;
  for (const listener of listeners) listener();
  if (!options.keepScroll) window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => {
  const page = window.location.pathname + window.location.search;
  if (page !== shown) visit++;
  shown = page;
  for (const listener of listeners) listener();
});

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    return () => {
      listeners.delete(update);
    };
  }, []);
  return location;
}

/** Same-tab links go through the router; modified clicks (new tab, download) stay the browser's. */
export function onLinkClick(event: MouseEvent): void {
  const anchor = event.currentTarget as HTMLAnchorElement;
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  if (anchor.target || anchor.origin !== window.location.origin) return;
  event.preventDefault();
  navigate(anchor.pathname + anchor.search + anchor.hash);
}

/** Where to come back to after signing in; kept out of the URL (it may hold an invitation token). */
export function rememberReturnTo(): void {
  const here = window.location.pathname + window.location.search + window.location.hash;
  if (!here.startsWith("/sign-in")) sessionStorage.setItem("returnTo", here);
}

export function takeReturnTo(): string {
  const target = sessionStorage.getItem("returnTo");
  sessionStorage.removeItem("returnTo");
  return target?.startsWith("/") && !target.startsWith("//") ? target : "/";
}
