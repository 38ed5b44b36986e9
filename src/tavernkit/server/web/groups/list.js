// The groups (#/groups): each group with its members' avatars, how many chats it has, a
// button that opens its latest chat (or starts one), and "New group".

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { reportError } from "../toast.js";
import { avatar } from "./common.js";
import { t } from "../i18n.js";

export async function showGroups(view) {
  const page = await api("GET", "/groups?limit=200");
  const list = h("ul", { class: "group-list", "aria-label": t("Groups") });
  for (const group of page.items) list.append(groupItem(group));
  if (!page.items.length) {
    list.append(h("li", { class: "empty muted" }, t("No groups yet: make one of your characters with “New group”.")));
  }
  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, t("Groups")),
      button(t("New group"), () => {
        window.location.hash = "#/group/new";
      }),
    ),
    list,
  );
}

function groupItem(group) {
  const names = group.members.map((m) => (m.muted ? t("{name} (muted)", { name: m.name }) : m.name));
  return h(
    "li",
    { class: "card group-item" },
    h("span", { class: "avatars" }, group.members.slice(0, 5).map((m) => avatar(m.thumbnail_url || "", m.name))),
    h(
      "span",
      { class: "group-text" },
      h("a", { href: `#/group/${encodeURIComponent(group.id)}`, class: "group-name" }, group.name),
      h("small", { class: "muted" }, names.join(", ") || t("no members")),
      h("small", { class: "muted" }, (group.chats.length === 1 ? t("1 chat") : t("{total} chats", { total: group.chats.length }))),
    ),
    button(t("Open chat"), () => openGroupChat(group).catch(reportError), { "aria-label": t("Open chat with {name}", { name: group.name }) }),
  );
}

// The group's most recent chat, or a new one when it has none.
export async function openGroupChat(group) {
  const ref = encodeURIComponent(group.id);
  const chats = await api("GET", `/groups/${ref}/chats?limit=1`);
  const chat = chats.items[0] || (await api("POST", `/groups/${ref}/chats`, {}));
  window.location.hash = `#/chat/${encodeURIComponent(chat.id)}`;
}
