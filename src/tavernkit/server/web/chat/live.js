// A turn's reply shown as it streams: text and reasoning in a live message at the end of the
// log (an impersonation fills the composer instead), fallback notices above it, an error kept
// in the chat's alerts with a Retry. A turn picked up again after a reload replaces the stored
// place of its reply, so nothing shows twice.

import { watchTurn } from "../api.js";
import { h } from "../dom.js";
import { render } from "../markdown.js";
import { reasoningPanel, textOf } from "./message.js";

// Errors that say the request itself cannot be done as asked: trying again cannot help.
const REFUSALS = new Set(["Conflict", "NotFound", "FormatError", "ChatTurnError", "PermissionDenied"]);

// `resumed`: the turn was started before this page (a reload); its stored reply place is
// hidden while the live one shows.
export function followTurn({ chat, eventsUrl, kind, log, alerts, composer, retry, resumed, onEnd }) {
  const last = log.lastMessage();
  const lastIsReply = last && !last.data.is_user;
  const unfinished = lastIsReply && last.partial_swipes.includes(last.data.swipe_id ?? 0);
  const replaces = kind === "swipe" || kind === "regenerate" || kind === "continue";
  if (kind !== "impersonate" && lastIsReply && (replaces || (resumed && unfinished))) {
    const stored = log.lastNode();
    if (stored) stored.hidden = true;
  }
  // what the live message starts from: a continued reply's text before this turn
  const base = kind === "continue" && lastIsReply ? textOf(last.data.mes) : "";
  let streamed = "";
  let reasoning = "";
  const shownText = () => (resumed ? joinContinued(base, streamed) : base + streamed);

  const body = h("div", { class: "body" });
  const panel = reasoningPanel("", true);
  panel.hidden = true;
  const live = h(
    "li",
    { class: "message char live", "aria-busy": "true" },
    h("div", { class: "meta" }, h("span", { class: "name" }, chat.character_name || ""), h("span", { class: "typing" }, "writing…")),
    panel,
    body,
  );
  if (kind !== "impersonate") log.appendExtra(live);
  else composer.setText("");

  let pending = false;
  const paint = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (kind === "impersonate") {
        composer.setText(streamed);
        return;
      }
      body.replaceChildren(render(shownText()));
      panel.querySelector("pre").textContent = reasoning;
      panel.hidden = !reasoning;
      log.followNewest();
    });
  };

  return watchTurn(chat.id, eventsUrl, kind, {
    text(data) {
      streamed += data.text || "";
      paint();
    },
    reasoning(data) {
      reasoning += data.text || "";
      paint();
    },
    notice(data) {
      if (data.kind === "started") return;
      live.before(h("li", { class: "notice extra", role: "note" }, data.text || data.kind));
    },
    error(data) {
      const text = data.message || `The reply failed (${data.code || "unknown error"})`;
      alerts.show(text, REFUSALS.has(data.class) ? {} : { retry });
    },
    done(data) {
      if (data.status === "failed" && kind === "impersonate" && !data.error) {
        alerts.show("Impersonation failed", { retry });
      }
      onEnd(streamed);
    },
    lost() {
      alerts.show("Lost the reply's stream: the server no longer knows this turn.");
      onEnd(streamed);
    },
  });
}

// A continued reply picked up after a reload: the stored text already holds the first part of
// the continuation (written while it streamed), and the replayed events hold all of it.
function joinContinued(stored, streamed) {
  for (let k = Math.min(stored.length, streamed.length); k > 0; k -= 1) {
    if (stored.endsWith(streamed.slice(0, k))) return stored + streamed.slice(k);
  }
  return stored + streamed;
}
