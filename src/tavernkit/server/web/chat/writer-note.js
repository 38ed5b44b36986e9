// The chat side panel's note on the character's writer: when the chat's character writes with
// its own connection profile or preset (character/writer.js), the Connection panel's choice is
// not what its turns use, so this says which is, with a link to change it. Nothing when the
// character has no writer (or in a group chat: each member's editor shows its own).

import { api } from "../api.js";
import { h } from "../dom.js";
import { t } from "../i18n.js";

export async function writerNote(chat) {
  if (!chat.character_id) return null;
  const id = encodeURIComponent(chat.character_id);
  // a chat whose character is gone has no writer to show (the chat itself still opens)
  const writer = await api("GET", `/characters/${id}/writer`).catch(() => null);
  if (!writer) return null;
  if (!writer.profile && !writer.preset) return null;
  const parts = [writer.profile && t("profile {name}", { name: writer.profile }), writer.preset && t("preset {name}", { name: writer.preset })].filter(Boolean);
  return h(
    "p",
    { class: "muted writer-note" },
    t("{character} writes with {what}. ", { character: writer.character, what: parts.join(t(" and ")) }),
    h("a", { href: `#/character/${id}` }, t("Change the writer")),
  );
}
