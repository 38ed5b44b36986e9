// What the group screens and a group chat share: labelled fields, a member's thumbnail, and the
// names of the group settings (the avatar itself is avatar.js's, shared with the chat).

import { api } from "../api.js";
import { h } from "../dom.js";
import { t } from "../i18n.js";

let ids = 0;

// A labelled control: `label` names `input` (by for/id, so a select's chosen option is not part
// of its name).
export function field(label, input, extra = "") {
  if (!input.id) {
    ids += 1;
    input.id = `group-field-${ids}`;
  }
  return h("div", { class: `field ${extra}`.trim() }, h("label", { for: input.id }, label), input);
}

// The thumbnail of a stored character (id or name).
export function thumbnailUrl(character) {
  return `/characters/${encodeURIComponent(character)}/thumbnail`;
}

// The stored character a member avatar file names when no member says: SillyTavern's
// `Alice.png` is the character `Alice`.
export function characterOfAvatar(avatar) {
  return avatar.includes(".") ? avatar.slice(0, avatar.lastIndexOf(".")) : avatar;
}

export { avatar } from "../avatar.js";

// group_activation_strategy, as SillyTavern names them
export const STRATEGIES = [
  ["natural", t("Natural order")],
  ["list", t("List order")],
  ["manual", t("Manual")],
  ["pooled", t("Pooled order")],
];

// group_generation_mode
export const MODES = [
  ["swap", t("Swap character cards")],
  ["join", t("Join character cards (exclude muted)")],
  ["join-muted", t("Join character cards (include muted)")],
];

// The group's chats (newest first), each a link to the chat screen; `current`: the open one.
export async function groupChats(group, current = null) {
  const page = await api("GET", `/groups/${encodeURIComponent(group.id)}/chats?limit=200`);
  return page.items.map((c) =>
    h(
      "li",
      { class: c.id === current ? "current" : "" },
      h("a", { href: `#/chat/${encodeURIComponent(c.id)}` }, c.name),
      h("small", {}, t(" {message_count} messages", { message_count: c.message_count })),
    ),
  );
}
