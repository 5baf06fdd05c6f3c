// The shell: who is signed in, the header, and which page a path shows.
import { useEffect, useState } from "preact/hooks";
import { ApiError, get, onSignedOut, signOut, type User } from "./api.ts";
import { CliAuthorizePage, CliSessionsPage } from "./pages/cli.tsx";
import { PendingInvitations } from "./pages/invitations.tsx";
import { InvitePage } from "./pages/invite.tsx";
import { ProjectPage } from "./pages/project.tsx";
import { ProjectsPage } from "./pages/projects.tsx";
import { SetPasswordPage } from "./pages/set-password.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { navigate, rememberReturnTo, takeReturnTo, useLocation } from "./router.ts";
import { Link, Main, messageOf, useFocusOnNavigation } from "./ui.tsx";

type Session = { state: "loading" } | { state: "signed-out" } | { state: "signed-in"; user: User } | { state: "error"; message: string };

export function App() {
  const location = useLocation();
  const [session, setSession] = useState<Session>({ state: "loading" });
  const [signOutError, setSignOutError] = useState<string>();
  // Said about the click just made: it goes with the next page.
  useEffect(() => setSignOutError(undefined), [location.pathname, session.state]);

  async function loadMe() {
    try {
      const { user } = await get<{ user: User }>("/api/auth/me");
      setSession({ state: "signed-in", user });
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) setSession({ state: "signed-out" });
      else setSession({ state: "error", message: messageOf(error) });
    }
  }

  useEffect(() => {
    void loadMe();
    return onSignedOut(() => setSession({ state: "signed-out" }));
  }, []);

  const onSignInPage = location.pathname === "/sign-in";
  // A local account's one-time link is opened signed out: it is how one gets a password.
  const onSetPasswordPage = location.pathname === "/set-password";
  useEffect(() => {
    if (session.state === "signed-out" && !onSignInPage && !onSetPasswordPage) {
      rememberReturnTo();
      navigate("/sign-in", { replace: true });
    }
    if (session.state === "signed-in" && onSignInPage) navigate(takeReturnTo(), { replace: true });
  }, [session.state, onSignInPage, onSetPasswordPage]);

  // A project page names itself (its name is known only once loaded): see ProjectPage.
  useFocusOnNavigation(location.visit);
  const title = titleFor(location.pathname);
  useEffect(() => {
    if (title) document.title = title;
  }, [title]);

  if (session.state === "loading")
    return (
      <p class="boot" role="status">
        Loading…
      </p>
    );
  if (session.state === "error") {
    return (
      <main class="narrow">
        <h1>Secrets</h1>
        <p class="error" role="alert">
          {session.message}
        </p>
        <button type="button" onClick={() => void loadMe()}>
          Try again
        </button>
      </main>
    );
  }
  if (onSetPasswordPage) {
    return (
      <SetPasswordPage
        // A second link opened in the same tab is a page of its own: nothing of the first one's answer stays.
        key={location.hash}
        token={location.hash.replace(/^#/, "")}
        onSignedIn={(user) => {
          setSession({ state: "signed-in", user });
          navigate("/", { replace: true });
        }}
      />
    );
  }
  if (session.state === "signed-out" || onSignInPage) {
    return <SignInPage onSignedIn={(user) => setSession({ state: "signed-in", user })} />;
  }

  const user = session.user;
  return (
    <>
      {/* Focus moves without following "#main": on the invitation page the address's fragment is the invitation. */}
      {/* biome-ignore lint/a11y/useValidAnchor: a skip link is in-page navigation, and stays a link without script. */}
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          const main = document.getElementById("main");
          main?.focus();
          main?.scrollIntoView();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          Secrets
        </Link>
        <nav aria-label="Main">
          <Link href="/" aria-current={location.pathname === "/" ? "page" : undefined}>
            Projects
          </Link>
          <Link href="/cli-sessions" aria-current={location.pathname === "/cli-sessions" ? "page" : undefined}>
            CLI sessions
          </Link>
        </nav>
        <div class="who">
          <span class="muted" title={user.email ?? undefined}>
            {user.name ?? user.email}
          </span>
          <button
            type="button"
            onClick={async () => {
              const problem = await signOut();
              setSignOutError(problem);
              if (problem) return;
              setSession({ state: "signed-out" });
              sessionStorage.removeItem("returnTo");
              navigate("/sign-in", { replace: true });
            }}
          >
            Sign out
          </button>
          {signOutError && (
            <span class="error" role="alert">
              {signOutError}
            </span>
          )}
        </div>
      </header>
      <Route user={user} pathname={location.pathname} search={location.search} hash={location.hash} visit={location.visit} />
    </>
  );
}

function Route({
  user,
  pathname,
  search,
  hash,
  visit,
}: {
  user: User;
  pathname: string;
  search: URLSearchParams;
  hash: string;
  visit: number;
}) {
  const parts = pathname.split("/").filter(Boolean).map(decodedSegment);
  // A project lays out its own navigation beside its <main>; every other page is all main.
  // Keyed by the project: going from one project to another (Back, Forward) starts with nothing of the first.
  if (parts[0] === "projects" && parts[1])
    return <ProjectPage key={parts[1]} projectId={parts[1]} section={parts[2]} sub={parts[3]} visit={visit} />;
  if (parts.length === 0) {
    return (
      <Main>
        <PendingInvitations />
        <ProjectsPage />
      </Main>
    );
  }
  if (parts[0] === "cli-sessions")
    return (
      <Main>
        <CliSessionsPage />
      </Main>
    );
  if (parts[0] === "cli" && parts[1] === "authorize")
    return (
      <Main>
        <CliAuthorizePage code={search.get("code") ?? ""} />
      </Main>
    );
  // Keyed by the link: another invitation link opened in this tab (only the fragment differs,
  // so the page stays) must not keep the previous link's answer or its "joined" state.
  if (parts[0] === "invite")
    return (
      <Main>
        <InvitePage key={hash} token={hash.replace(/^#/, "")} user={user} joinedProject={search.get("joined") ?? undefined} />
      </Main>
    );
  return (
    <Main>
      <h1>Page not found</h1>
      <p>
        There is nothing at this address. <Link href="/">Go to your projects</Link>.
      </p>
    </Main>
  );
}

/** The tab's title for a path, as Route reads it; null where the page sets its own. */
function titleFor(pathname: string): string | null {
  const parts = pathname.split("/").filter(Boolean);
  const page = (name: string) => `${name} · Secrets`;
  if (parts.length === 0) return page("Projects");
  if (pathname === "/sign-in") return page("Sign in");
  if (pathname === "/set-password") return page("Set a password");
  if (parts[0] === "projects" && parts[1]) return null;
  if (parts[0] === "cli-sessions") return page("CLI sessions");
  if (parts[0] === "cli" && parts[1] === "authorize") return page("Authorize the CLI");
  if (parts[0] === "invite") return page("Invitation");
  return page("Page not found");
}

/** A path segment decoded; a malformed escape (a mangled link) is kept as it is rather than blank the app. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
