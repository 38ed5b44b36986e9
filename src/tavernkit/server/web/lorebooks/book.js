// What the list and the editor both do to a whole book: rename it in place, duplicate, export
// (SillyTavern's world-info JSON, as a download), delete (after a confirm that says where it is
// bound), and the words for a binding.

import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";
import { t } from "../i18n.js";

export const bookPath = (book) => `/lorebooks/${encodeURIComponent(book.id)}`;

// A lorebook name the server refused as taken, said plainly.
export function nameError(error, name) {
  if (error instanceof ApiError && error.status === 409) return t("A lorebook named “{name}” exists already.", { name });
  return null;
}

// A chat as a picker shows it: its name, after its character's unless the name starts so.
export function chatName(character, name) {
  return character && !name.startsWith(character) ? `${character} – ${name}` : name;
}

// "Chat: Mira – Evening", "Character: Mira (the card's own lorebook)"...; `link`: chats and
// characters as links to them.
export function bindingLabel(b, { link = false } = {}) {
  if (b.scope === "global") return [t("Every chat (global)")];
  if (b.scope === "chat") {
    const name = chatName(b.character_name, b.name);
    return [t("Chat: "), link ? h("a", { href: `#/chat/${encodeURIComponent(b.id)}` }, name) : name];
  }
  if (b.scope === "character") {
    const via = { card: t(" (the card's own lorebook)"), extra: t(" (an extra lorebook in settings)") }[b.via] || "";
    return [t("Character: "), b.name, via];
  }
  return [t("Persona: "), b.name];
}

export function bindingText(b) {
  return bindingLabel(b).join("");
}

export function exportLink(book) {
  return h(
    "a",
    { class: "button", href: `/export/lorebook/${encodeURIComponent(book.id)}?format=json`, download: `${book.name}.json` },
    t("Export"),
  );
}

// Replace `slot`'s children with a name field, "Save name" and "Cancel" (Enter and Escape
// too). `done(line)` runs with the renamed book's line; `cancel()` when the user gives up.
export function renameInPlace(slot, book, { done, cancel, fail }) {
  const input = h("input", { value: book.name, class: "name-input" });
  const label = h("label", { class: "field" }, t("New name"), input);
  const save = async () => {
    const name = input.value.trim();
    if (!name || name === book.name) return cancel();
    try {
      done(await api("POST", `${bookPath(book)}/rename`, { name }));
    } catch (error) {
      fail(error, nameError(error, name));
    }
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") save();
    if (event.key === "Escape") cancel();
  });
  slot.replaceChildren(h("span", { class: "rename" }, label, button(t("Save name"), save), button(t("Cancel"), cancel)));
  input.select();
  input.focus();
}

export async function duplicateBook(book) {
  return api("POST", `${bookPath(book)}/duplicate`, {});
}

// Delete after a confirm naming where the book is bound; true when it was deleted.
export async function deleteBook(book, usedBy = []) {
  const where = usedBy.length ? t("\n\nIt is bound to: {names}. Those bindings go too.", { names: usedBy.map(bindingText).join("; ") }) : "";
  if (!window.confirm(t("Delete the lorebook “{name}”?{where}", { name: book.name, where }))) return false;
  await api("DELETE", bookPath(book));
  return true;
}
