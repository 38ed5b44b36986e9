// A group chat's parts of the chat screen (chat/screen.js asks for them when the chat has no
// character of its own): its turns go to the group-turns route; each message shows its
// speaker's avatar; the live replies of a turn, one per member, each under its speaker; a
// members strip over the message box: who speaks next (as the strategy decides), a "Make X
// speak" per member (SillyTavern's force talk: a "trigger" turn) and auto mode; the side panel's
// group section (members, the group's chats, a new chat).
//
// Auto mode (SillyTavern's): while it is on, the members go on among themselves, one turn
// `auto_mode_delay` seconds after the last ended; typing in the message box, Stop, or a turn
// that fails switches it off. It is not saved.

import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";
import { reportError } from "../toast.js";
import { avatar, characterOfAvatar, groupChats, thumbnailUrl } from "../groups/common.js";
import { t } from "../i18n.js";

// Where the stored messages a running group turn replaces start: a reload mid-turn replays
// every member's reply from the start, so those stored places are hidden again.
const replacedKey = (chatId) => `tavernkit.groupturn.${chatId}`;

// The group of the chat, or null for a solo chat.
export async function openGroup(chat, base) {
  let group;
  try {
    group = await api("GET", `${base}/group`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
  const pictures = new Map(group.members.map((m) => [m.avatar, m.thumbnail_url || ""]));
  // the avatar file of a message's speaker -> its thumbnail (none for a member without a
  // picture, such as a JSON card, so nothing is asked for; a former member's by its name)
  const avatarUrl = (file) => {
    if (!file || file === "none") return "";
    return pictures.has(file) ? pictures.get(file) : thumbnailUrl(characterOfAvatar(file));
  };
  let hooks = null; // {start(kind, text, extra), busy()}

  // -- messages ----------------------------------------------------------------------------

  // A stored message with its speaker's avatar (and its batch, for a regeneration).
  function decorate(node, message) {
    const data = message.data;
    if (!data.is_user) {
      const name = node.querySelector(".meta .name");
      if (name) name.before(avatar(avatarUrl(data.original_avatar), data.name));
      node.classList.add("speaker");
    }
    const gen = data.extra && data.extra.gen_id;
    if (gen !== undefined && gen !== null) node.dataset.gen = String(gen);
    return node;
  }

  // A live message's speaker (a member notice of the turn's events).
  function speaker(live, name, file) {
    const meta = live.querySelector(".meta");
    meta.querySelector(".avatar")?.remove();
    meta.querySelector(".name").textContent = name || "";
    meta.prepend(avatar(avatarUrl(file), name));
    live.classList.add("speaker");
  }

  const storedNodes = (log) => [...log.list.querySelectorAll(":scope > .message[data-index]")];

  // Hide the stored messages this turn replaces (a swipe or continue: the last reply; a
  // regeneration: the last batch of replies); a turn picked up after a reload hides what it
  // already stored, since its replay shows it again.
  function hideReplaced(log, kind, resumed, eventsUrl) {
    const nodes = storedNodes(log);
    let from = null;
    if (resumed) {
      let saved = null;
      try {
        saved = JSON.parse(localStorage.getItem(replacedKey(chat.id)) || "null");
      } catch {
        saved = null;
      }
      if (saved && saved.url === eventsUrl) from = saved.from;
    } else {
      const last = nodes[nodes.length - 1];
      const lastIsReply = last && last.classList.contains("char");
      if (kind === "swipe" || kind === "continue") {
        if (lastIsReply) from = Number(last.dataset.index);
      } else if (kind === "regenerate") {
        for (let i = nodes.length - 1; i >= 0 && nodes[i].classList.contains("char"); i -= 1) {
          if (last.dataset.gen !== undefined && nodes[i].dataset.gen !== last.dataset.gen) break;
          from = Number(nodes[i].dataset.index);
        }
      } else if (kind !== "impersonate") {
        from = last ? Number(last.dataset.index) + 1 : 0;
      }
      if (from !== null) localStorage.setItem(replacedKey(chat.id), JSON.stringify({ url: eventsUrl, from }));
    }
    if (from === null) return;
    for (const node of nodes) {
      if (node.classList.contains("char") && Number(node.dataset.index) >= from) node.hidden = true;
    }
  }

  // -- the members strip: who speaks next, make a member speak now, auto mode ------------

  // SillyTavern's "force talk": that member replies now, whatever the strategy and muted or
  // not (a muted member speaks only when asked)
  const speakButton = (m) =>
    button(t("Make {name} speak", { name: m.name }), () => {
      if (hooks) hooks.start("trigger", "", { member: m.avatar });
    });
  const upcoming = nextSpeakers(group);
  const chips = group.members.map((m) =>
    h(
      "li",
      { class: `speaker-chip${m.muted ? " is-muted" : ""}${upcoming.first === m ? " is-next" : ""}` },
      avatar(avatarUrl(m.avatar), m.name),
      speakButton(m),
      m.muted ? h("small", { class: "chip-note" }, t("muted")) : null,
      upcoming.first === m ? h("small", { class: "chip-note" }, t("next")) : null,
    ),
  );
  const auto = h("input", { type: "checkbox" });
  let autoTimer = null;
  const delayMs = () => Math.max(1, Number(group.auto_mode_delay) || 5) * 1000;

  function setAuto(on) {
    auto.checked = on;
    clearTimeout(autoTimer);
    autoTimer = null;
    if (on) schedule();
  }
  function schedule() {
    clearTimeout(autoTimer);
    autoTimer = setTimeout(tick, delayMs());
  }
  async function tick() {
    autoTimer = null;
    if (!auto.checked || !hooks) return;
    if (hooks.busy()) return; // the running turn's end asks again
    if (!(await hooks.start("send", "", { auto: true }))) setAuto(false);
  }
  auto.addEventListener("change", () => setAuto(auto.checked));

  const bar = h(
    "section",
    { class: "group-bar", "aria-label": t("Who speaks") },
    h(
      "div",
      { class: "group-bar-head" },
      h("p", { class: "next-speaker" }, upcoming.text),
      h("label", { class: "field check" }, auto, t("Auto mode")),
    ),
    // the whole width for the members: on a phone the row scrolls sideways
    h("ul", { class: "speakers", "aria-label": t("Speakers") }, chips),
  );

  // -- the side panel's group section ------------------------------------------------------

  const chatList = h("ul", { class: "chat-list", "aria-label": t("Group chats") });
  const loadChats = async () => chatList.replaceChildren(...(await groupChats(group, chat.id)));
  const newChat = button(t("New chat"), async () => {
    try {
      const made = await api("POST", `/groups/${encodeURIComponent(group.id)}/chats`, {});
      window.location.hash = `#/chat/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });
  const panel = h(
    "details",
    { class: "panel group-panel", open: true },
    h("summary", {}, t("Group")),
    // the editor offers the way back to this chat (`?chat=`)
    h("a", { href: `#/group/${encodeURIComponent(group.id)}?${new URLSearchParams({ chat: chat.id })}` }, t("Edit group")),
    h(
      "ul",
      { class: "members compact", "aria-label": t("Members") },
      group.members.map((m) =>
        h(
          "li",
          { class: `member${m.muted ? " is-muted" : ""}` },
          avatar(avatarUrl(m.avatar), m.name),
          h("span", { class: "name" }, m.name),
          m.muted ? h("small", { class: "muted" }, t(" muted")) : null,
        ),
      ),
    ),
    group.missing.length ? h("p", { class: "muted" }, t("Missing: {names}", { names: group.missing.join(", ") })) : null,
    h("h3", {}, t("Chats")),
    newChat,
    chatList,
  );
  loadChats().catch(reportError);

  return {
    group,
    turnsUrl: `${base}/group-turns`,
    decorate,
    speaker,
    hideReplaced,
    bar,
    panel,
    // `on`: {start(kind, text, extra) -> whether it started, busy()}; the composer's box
    // switches auto mode off when typed in
    attach(on, composer) {
      hooks = on;
      composer.node.addEventListener("keyup", (event) => {
        if (event.target instanceof HTMLTextAreaElement) setAuto(false);
      });
    },
    // a turn ended (`outcome`: its done event, or null when it was lost)
    turnEnded(outcome) {
      localStorage.removeItem(replacedKey(chat.id));
      if (!auto.checked) return;
      if (!outcome || outcome.status !== "completed") setAuto(false);
      else schedule();
    },
    stopAuto: () => setAuto(false),
    close: () => setAuto(false),
  };
}

// Who replies to the next message, as the group's strategy decides (groups/selection.py):
// `text` says it; `first`: the member who surely speaks first (list order), else null.
// Natural and pooled orders draw at random, so they name who may speak.
export function nextSpeakers(group) {
  const members = group.members;
  const enabled = members.filter((m) => !m.muted);
  const names = (list) => list.map((m) => m.name).join(", ");
  if (!members.length) return { first: null, text: t("No members: add some in Edit group.") };
  if (group.strategy === "manual" || !group.strategy) {
    return { first: null, text: t("Manual: nobody replies on their own. Pick who speaks next.") };
  }
  if (!enabled.length) {
    return { first: null, text: t("Every member is muted: nobody replies unless you make one speak.") };
  }
  if (group.strategy === "list") {
    const [first, ...rest] = enabled;
    return {
      first,
      text: rest.length
        ? t("Next: {name}, then {rest} (list order)", { name: first.name, rest: names(rest) })
        : t("Next: {name} (list order)", { name: first.name }),
    };
  }
  if (group.strategy === "pooled") {
    return { first: null, text: t("May speak next: one of {names} (pooled order)", { names: names(enabled) }) };
  }
  return {
    first: null,
    text: t("May speak next: {names} (natural order: whoever you name, else by talkativeness)", { names: names(enabled) }),
  };
}
