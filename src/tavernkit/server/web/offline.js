// The installable app's two parts on the page: registering the service worker (sw.js, which
// caches the shell, never API data) and the "server unreachable" screen the UI shows when a
// request cannot reach the server at all (offline, or tavernkit serve stopped): what happened,
// that nothing is lost, a Retry button, and a retry by itself when the browser is online again.

import { button, h } from "./dom.js";
import { t } from "./i18n.js";

export function registerServiceWorker() {
  // Only secure origins (https, or localhost) have service workers; elsewhere the UI works as
  // a plain page.
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register("/sw.js").catch((error) => {
    console.warn("the service worker did not register:", error);
  });
}

export function showUnreachable(view, retry) {
  window.addEventListener("online", retry, { once: true });
  view.replaceChildren(
    h(
      "section",
      { class: "card unreachable", role: "alert", "aria-label": t("Server unreachable") },
      h("h1", {}, t("Server unreachable")),
      h("p", {}, t("tavernkit cannot reach its server at {host}: this device may be offline, or the server is not running.", { host: window.location.host })),
      h("p", { class: "muted" }, t("Your characters and chats are kept on the server; nothing is lost. This page tries again when the connection comes back.")),
      button(t("Retry"), retry),
    ),
  );
}
