// The quick-reply bar over the composer: the Quick Reply sets bound globally, to this chat and
// to its character (GET /chats/{id}/quick-replies, SillyTavern's order), one group of buttons
// per set. A reply with a context menu (its contextList) has a "More: <label>" button listing
// the replies of the sets it links. What a click does is the screen's: `onClick(set, reply)`,
// and `onClick(set, reply, {set, reply})` for a reply picked from that parent's menu.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { t } from "../i18n.js";

// The lines to run for a reply: [true, commands] when every line is a command, else
// [false, [text]] (the same rule as the terminal chat).
export function replyLines(message) {
  const lines = message.split("\n").map((line) => line.trim()).filter(Boolean);
  if (lines.length && lines.every((line) => line.startsWith("/"))) return [true, lines];
  return [false, message.trim() ? [message.trim()] : []];
}

// SillyTavern's button text (stscript/quick_replies.py click_text): with injectInput the reply
// joins what is typed (before it with placeBeforeInput), otherwise the reply and a space.
export function clickText(set, reply, typed) {
  const message = reply.message || "";
  if (set.injectInput && typed) return set.placeBeforeInput ? `${message} ${typed}` : `${typed} ${message}`;
  return `${message} `;
}

// A reply picked from `parent`'s context menu, as SillyTavern's menu runs it
// (stscript/quick_replies.py menu_reply): a chained link to `setName` runs the parent's message
// first, piped into the reply's; %%parent%% is the parent's label.
export function menuMessage(parent, reply, setName) {
  const chained = (parent.contextList || []).some((link) => link.set === setName && link.isChained);
  let message = reply.message || "";
  if (chained && parent.message && message) message = `${parent.message} | ${message}`;
  return message.replace(/%%parent(-\d+)?%%/g, () => parent.label || "");
}

const shown = (reply) => !reply.isHidden && Boolean(reply.label || reply.icon);

export function createQuickReplies(base, onClick) {
  const bar = h("div", { class: "quick-replies", role: "toolbar", "aria-label": t("Quick replies") });
  bar.hidden = true;
  let sets = [];
  let linked = [];
  let openMenu = null;
  let lastDrawn = "";

  const findSet = (name) => sets.find((set) => set.name === name) || linked.find((set) => set.name === name);

  function closeMenu() {
    if (!openMenu) return;
    openMenu.menu.hidden = true;
    openMenu.more.setAttribute("aria-expanded", "false");
    openMenu = null;
  }

  function menuFor(set, reply, label) {
    const menu = h("div", { class: "qr-menu", role: "menu", "aria-label": label });
    menu.hidden = true;
    for (const link of reply.contextList || []) {
      const linkedSet = findSet(link.set);
      for (const item of linkedSet ? linkedSet.qrList || [] : []) {
        if (!shown(item)) continue;
        const pick = () => {
          closeMenu();
          onClick(linkedSet, item, { set, reply });
        };
        menu.append(button(item.label || item.icon, pick, { role: "menuitem", title: item.title || item.message }));
      }
    }
    return menu;
  }

  function replyButton(set, reply) {
    const label = reply.label || reply.icon;
    const node = button(label, () => onClick(set, reply), { title: reply.title || reply.message });
    const menu = (reply.contextList || []).length ? menuFor(set, reply, label) : null;
    if (!menu || !menu.childElementCount) return node;
    const key = `${set.name}\u0000${label}`;
    const open = () => {
      menu.hidden = false;
      more.setAttribute("aria-expanded", "true");
      openMenu = { menu, more, key, open };
    };
    const more = button("▾", () => {
      const opening = menu.hidden;
      closeMenu();
      if (!opening) return;
      open();
      menu.querySelector("button").focus();
    }, { class: "qr-more", "aria-label": t("More: {label}", { label }), "aria-haspopup": "menu", "aria-expanded": "false" });
    menus.set(key, open);
    menu.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      closeMenu();
      more.focus();
    });
    return h("span", { class: "qr-item" }, node, more, menu);
  }

  // A redraw (the sets read again: after a script, an automatic reply) keeps a menu the user
  // has open, open.
  const menus = new Map(); // set name + label -> opens that reply's menu
  function draw() {
    const reopen = openMenu ? openMenu.key : null;
    openMenu = null;
    menus.clear();
    bar.replaceChildren();
    for (const set of sets) {
      if (!set.visible) continue;
      const group = h("div", { class: "qr-set", role: "group", "aria-label": set.name, dataset: { scope: set.scope } });
      for (const reply of set.qrList || []) if (shown(reply)) group.append(replyButton(set, reply));
      if (group.childElementCount) bar.append(group);
    }
    bar.hidden = !bar.childElementCount;
    if (reopen && menus.has(reopen)) menus.get(reopen)();
  }

  return {
    node: bar,
    // (Re)read the chat's sets (after a script that may have changed them); answers the
    // server's reply (its `bindings` feed the side panel).
    async load() {
      const out = await api("GET", `${base}/quick-replies`);
      sets = out.sets || [];
      linked = out.linked || [];
      const drawn = JSON.stringify([sets, linked]);
      if (drawn !== lastDrawn) {
        lastDrawn = drawn;
        draw();
      }
      return out;
    },
    // [set, reply] of the first shown reply with that label (`/qr LABEL`), else null
    find(label) {
      for (const set of sets) {
        const reply = (set.qrList || []).find((item) => item.label === label);
        if (reply) return [set, reply];
      }
      return null;
    },
    // The [set, reply] pairs flagged for an automatic execution (`executeOnChatChange`,
    // `executeOnUser`, `executeOnAi`, `executeOnStartup`, `executeOnNewChat`), in the bar's
    // order; `scope`: only the sets bound there ("global").
    automatic(flag, scope = null) {
      const out = [];
      for (const set of sets) {
        if (scope && set.scope !== scope) continue;
        for (const reply of set.qrList || []) if (reply[flag]) out.push([set, reply]);
      }
      return out;
    },
  };
}
