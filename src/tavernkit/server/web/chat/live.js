// A turn's reply shown as it streams (a withdrawal takes back the end of the text shown): text
// and reasoning in a live message at the end of the log (an impersonation fills the composer
// instead; a group chat's turn shows one live message per member), fallback notices above it,
// an error kept in the chat's alerts with a Retry. A turn picked up again after a reload
// replaces the stored place of its reply, so nothing shows twice.

import { watchTurn } from "../api.js";
import { h } from "../dom.js";
import { render } from "../markdown.js";
import { reasoningPanel, textOf } from "./message.js";
import { t } from "../i18n.js";

// Errors that say the request itself cannot be done as asked: trying again cannot help.
const REFUSALS = new Set(["Conflict", "NotFound", "FormatError", "ChatTurnError", "PermissionDenied"]);

// What a failed reply's class (the server's safe code: never the provider's text) means for
// the user, and whether it is fixed in the connection's settings (a key, a URL, a model)
// rather than by trying again: those get a way there beside Retry.
const FAILURE_HELP = {
  auth: [t("The model's service refused the API key: check it in Settings."), true],
  missing_credential: [t("This connection has no API key: add one in Settings."), true],
  network: [t("The model's server could not be reached: is it running, and is its URL right?"), true],
  model_unavailable: [t("The service does not serve this model: pick another in Settings."), true],
  quota: [t("The API key's quota is used up."), true],
  egress_refused: [t("This server may not connect to that address: ask its admin, or use another connection."), true],
  rate_limit: [t("The service is limiting requests: wait a moment, then retry."), false],
  overloaded: [t("The model's server failed on its side: retry, or try again later."), false],
  timeout: [t("The model's server did not answer in time: retry, or raise the timeouts in Settings."), false],
  context_too_long: [t("The prompt is longer than the model's context: lower the context size, or hide old messages."), false],
  content_filter: [t("The service's safety filter blocked the prompt or the reply."), false],
};

// The alert for a failed reply: what the server said, what it means, and the ways on.
function showFailure(alerts, data, retry) {
  const said = data.message || t("The reply failed ({code})", { code: data.code || t("unknown error") });
  const [hint, inSettings] = FAILURE_HELP[data.class] || ["", false];
  const actions = inSettings ? [{ label: t("Connection settings"), run: () => (window.location.hash = "#/settings") }] : [];
  const text = hint ? `${said}. ${hint}` : said;
  alerts.show(text, REFUSALS.has(data.class) ? { actions } : { retry, actions });
}

// `resumed`: the turn was started before this page (a reload); its stored reply place is
// hidden while the live one shows. `group` (chat/group.js): a group chat's turn, where each
// member's reply opens with a member notice and gets a live message of its own.
export function followTurn({ chat, eventsUrl, kind, log, alerts, composer, retry, resumed, onEnd, group = null }) {
  const last = log.lastMessage();
  const lastIsReply = last && !last.data.is_user;
  const unfinished = lastIsReply && last.partial_swipes.includes(last.data.swipe_id ?? 0);
  const replaces = kind === "swipe" || kind === "regenerate" || kind === "continue";
  if (group) {
    group.hideReplaced(log, kind, resumed, eventsUrl);
  } else if (kind !== "impersonate" && lastIsReply && (replaces || (resumed && unfinished))) {
    const stored = log.lastNode();
    if (stored) stored.hidden = true;
  }
  // what the live message starts from: a continued reply's text before this turn
  let base = kind === "continue" && lastIsReply ? textOf(last.data.mes) : "";
  let streamed = "";
  let reasoning = "";
  let earlier = ""; // the text of the members who replied before in this turn (a group's)
  const shownText = () => (resumed ? joinContinued(base, streamed) : base + streamed);

  let body;
  let panel;
  let live;
  const liveMessage = (name) => {
    body = h("div", { class: "body" });
    panel = reasoningPanel("", true);
    panel.hidden = true;
    live = h(
      "li",
      { class: "message char live", "aria-busy": "true" },
      h("div", { class: "meta" }, h("span", { class: "name" }, name), h("span", { class: "typing" }, t("writing…"))),
      panel,
      body,
    );
    if (kind !== "impersonate") log.appendExtra(live);
  };
  liveMessage(group ? "" : chat.character_name || "");
  if (kind === "impersonate") composer.setText("");

  let pending = false;
  const paintNow = () => {
    if (kind === "impersonate") {
      composer.setText(streamed);
      return;
    }
    body.replaceChildren(render(shownText()));
    panel.querySelector("pre").textContent = reasoning;
    panel.hidden = !reasoning;
    log.followNewest();
  };
  const paint = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      paintNow();
    });
  };

  // A group member's reply begins: the live message so far is that member's (when nothing
  // came yet), else it is done and the member's own follows it.
  const member = (data) => {
    if (!group || kind === "impersonate") return;
    if (streamed || reasoning) {
      paintNow();
      live.removeAttribute("aria-busy");
      live.querySelector(".typing")?.remove();
      earlier += `${streamed}\n\n`;
      streamed = "";
      reasoning = "";
      base = "";
      liveMessage("");
    }
    group.speaker(live, data.name, data.avatar);
  };

  return watchTurn(chat.id, eventsUrl, kind, {
    text(data) {
      streamed += data.text || "";
      paint();
    },
    // Text shows as it arrives; when an attempt fails, its unfinished clause is taken back
    // here and the attempt that continues it writes it again, so it shows once.
    withdraw(data) {
      streamed = streamed.slice(0, Math.max(streamed.length - (data.text || "").length, 0));
      paint();
    },
    reasoning(data) {
      reasoning += data.text || "";
      paint();
    },
    notice(data) {
      if (data.kind === "started") return;
      if (data.kind === "member") {
        member(data);
        return;
      }
      live.before(h("li", { class: "notice extra", role: "note" }, data.text || data.kind));
    },
    error(data) {
      showFailure(alerts, data, retry);
    },
    done(data) {
      if (data.status === "failed" && kind === "impersonate" && !data.error) {
        alerts.show(t("Impersonation failed"), { retry });
      }
      onEnd(earlier + streamed, data);
    },
    lost() {
      alerts.show(t("Lost the reply's stream: the server no longer knows this turn."));
      onEnd(earlier + streamed, null);
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
