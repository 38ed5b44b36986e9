// The chat screen's side panel: the prompt inspector (for the persona picked here), the
// persona picker (chat/persona.js: the browser's choice, or the chat's or character's lock,
// sent with each turn), this chat's search, the connection, preset and samplers
// (chat/connection.js), the author's note, the character's other chats, memory
// (chat/memory.js) and the chat's variables. On a phone it opens over the chat.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { searchBox } from "../search.js";
import { variablesSection } from "../settings.js";
import { memoryPanel } from "./memory.js";
import { createChat } from "./auto-run.js";
import { reportError, toast } from "../toast.js";
import { createConnection } from "./connection.js";
import { createPersonaPicker } from "./persona.js";
import { writerNote } from "./writer-note.js";
import { t } from "../i18n.js";

// `onPersona(name)`: the persona picked ("" for none), at once and on each change
export async function createSide(chat, base, onPersona = () => {}) {
  const chatUrl = `/ui/chats/${encodeURIComponent(chat.id)}`;
  const inspect = h("a", { href: "" }, t("Prompt inspector"));
  const syncInspector = (persona) => {
    const query = persona ? `?${new URLSearchParams({ persona })}` : "";
    inspect.href = `#/inspect/${encodeURIComponent(chat.id)}${query}`;
    onPersona(persona);
  };
  const picker = await createPersonaPicker(chat, syncInspector);

  const close = button(t("Close"), () => node.classList.remove("open"), { class: "tools-close" });
  const node = h(
    "aside",
    { class: "side", "aria-label": t("Chat tools") },
    h("div", { class: "side-head" }, h("h2", {}, chat.character_name || t("Chat")), close),
    inspect,
    picker.node,
    h("details", { class: "panel" }, h("summary", {}, t("Search this chat")), searchBox(t("Search this chat"), { chat: chat.id }, { showChat: false }).node),
    await createConnection(),
    await writerNote(chat),
    await authorsNote(chatUrl),
    chat.character_id ? chatsPanel(chat) : null, // a group chat lists its group's (chat/group.js)
    await memoryPanel(chat.id),
    h("details", { class: "panel" }, h("summary", {}, t("Chat variables")), await variablesSection(`${base}/variables`, t("Chat variables"))),
  );
  return { node, persona: picker.persona, setPersona: picker.setPersona };
}

async function authorsNote(chatUrl) {
  const note = await api("GET", `${chatUrl}/authors-note`);
  const text = h("textarea", { rows: 3, "aria-label": t("Author's note") });
  text.value = note.text;
  const depth = h("input", { type: "number", min: 0, value: note.depth, "aria-label": t("Author's note depth") });
  return h(
    "details",
    { class: "panel" },
    h("summary", {}, t("Author's note")),
    text,
    h("label", {}, t("Depth "), depth),
    button(t("Save note"), async () => {
      try {
        await api("PUT", `${chatUrl}/authors-note`, { ...note, text: text.value, depth: Number(depth.value) || 0 });
        toast(t("Author's note saved"), "info");
      } catch (error) {
        reportError(error);
      }
    }),
  );
}

function chatsPanel(chat) {
  const list = h("ul", { class: "chat-list", "aria-label": t("Chats") });
  const search = h("input", { type: "search", placeholder: t("Search chats"), "aria-label": t("Search chats") });

  async function load() {
    if (!chat.character_id) return;
    const page = await api("GET", `/chats?${new URLSearchParams({ character: chat.character_id, limit: 500 })}`);
    const needle = search.value.trim().toLowerCase();
    list.replaceChildren(
      ...page.items
        .filter((c) => !needle || c.name.toLowerCase().includes(needle))
        .map((c) =>
          h(
            "li",
            { class: c.id === chat.id ? "current" : "" },
            h("a", { href: `#/chat/${encodeURIComponent(c.id)}` }, c.name),
            h("small", {}, t(" {message_count} messages", { message_count: c.message_count })),
          ),
        ),
    );
  }
  search.addEventListener("input", () => load().catch(reportError));
  const newChat = button(t("New chat"), async () => {
    try {
      const made = await createChat({ character: chat.character_id });
      window.location.hash = `#/chat/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });
  load().catch(reportError);
  const messages = chat.character_id
    ? searchBox(t("Search these chats' messages"), { character: chat.character_id }).node
    : null;
  return h("details", { class: "panel" }, h("summary", {}, t("Chats")), newChat, search, list, messages);
}
