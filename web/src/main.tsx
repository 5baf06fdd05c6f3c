import { render } from "preact";
import { App } from "./app.tsx";

const root = document.getElementById("app")!;
render(<App />, root);

// A page the browser keeps in its back/forward cache would come back as it was left, with
// revealed values and a token shown once on it. It is emptied as it is left, and loaded
// anew should it come back.
window.addEventListener("pagehide", (event) => {
  if (event.persisted) render(null, root);
});
window.addEventListener("pageshow", (event) => {
  if (event.persisted) location.reload();
});
