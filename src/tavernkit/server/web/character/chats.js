// A character's chats, from its editor: open one, start a new one, rename, export (SillyTavern's
// .jsonl), delete (after a confirmation) and import a .jsonl chat file for this character.

import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";
import { toast } from "../toast.js";
import { createChat } from "../chat/auto-run.js";
import { confirmDialog, download, named } from "./files.js";
import { t } from "../i18n.js";

const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

// `character`: {id, name}; `fail(error, retry)` keeps an error in view.
export function createChats(character, fail) {
  const list = h("ul", { class: "character-chats", "aria-label": t("Chats with {name}", { name: character.name }) });
  const count = h("span", { class: "muted" });
  const picker = h("input", { type: "file", accept: ".jsonl,application/x-ndjson,application/json", hidden: true });

  async function load() {
    const query = new URLSearchParams({ character: character.id, limit: 500 });
    const page = await api("GET", `/chats?${query}`);
    count.textContent = page.total === 1 ? t("1 chat") : t("{total} chats", { total: page.total });
    list.replaceChildren(...page.items.map(row));
    if (!page.items.length) list.append(h("li", { class: "muted" }, t("No chats yet.")));
    return page.total;
  }

  const reload = () => load().catch((error) => fail(error, reload));

  function row(chat) {
    const item = h("li", { class: "chat-row" });
    const link = h("a", { href: `#/chat/${encodeURIComponent(chat.id)}` }, chat.name);
    const meta = h("span", { class: "muted" }, t("{message_count} messages · {value}", { message_count: chat.message_count, value: when.format(new Date(chat.updated)) }));
    const actions = h(
      "span",
      { class: "row" },
      button(named(t("Rename"), chat.name), () => rename()),
      button(named(t("Export"), chat.name), () =>
        download(`/export/chat/${encodeURIComponent(chat.id)}?format=jsonl`, `${chat.name}.jsonl`).catch((error) =>
          fail(error),
        ),
      ),
      button(named(t("Delete"), chat.name), () => remove(), { class: "danger" }),
    );
    item.append(h("div", { class: "chat-title" }, link, meta), actions);

    function rename() {
      const input = h("input", { type: "text", value: chat.name });
      const save = async () => {
        const name = input.value.trim();
        if (!name) {
          input.focus();
          return;
        }
        try {
          await api("PATCH", `/chats/${encodeURIComponent(chat.id)}`, { name });
          toast(t("Renamed to {name}", { name }), "info");
          await load();
        } catch (error) {
          fail(error);
        }
      };
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") save();
        if (event.key === "Escape") load().catch(fail);
      });
      const form = h(
        "div",
        { class: "row rename" },
        h("label", { class: "field" }, t("New name for {name}", { name: chat.name }), input),
        button(t("Save name"), save, { class: "primary" }),
        button(t("Cancel"), () => load().catch(fail)),
      );
      item.replaceChildren(form);
      input.select();
    }

    async function remove() {
      const answer = await confirmDialog(t("Delete the chat {name}?", { name: chat.name }), t("Its messages cannot be brought back."));
      if (!answer.ok) return;
      try {
        await api("DELETE", `/chats/${encodeURIComponent(chat.id)}`);
        toast(t("Deleted {name}", { name: chat.name }), "info");
        await load();
      } catch (error) {
        fail(error);
      }
    }
    return item;
  }

  async function importFile(file, replace = false) {
    const form = new FormData();
    form.append("file", file, file.name);
    const query = new URLSearchParams({ character: character.id });
    if (replace) query.set("replace", "true");
    try {
      const results = await api("POST", `/import?${query}`, form);
      const chats = results.filter((r) => r.kind === "chat");
      toast(chats.length ? t("Imported {names}", { names: chats.map((r) => r.name).join(", ") }) : t("Nothing to import"), "info");
      await load();
    } catch (error) {
      const taken = error instanceof ApiError && error.body && error.body.type === "NameTaken";
      fail(error, taken ? () => importFile(file, true) : null, taken ? t("Replace it") : null);
    }
  }

  picker.addEventListener("change", () => {
    const files = [...picker.files];
    picker.value = "";
    (async () => {
      for (const file of files) await importFile(file);
    })();
  });

  const newChat = button(t("New chat"), async () => {
    try {
      const chat = await createChat({ character: character.id });
      window.location.hash = `#/chat/${encodeURIComponent(chat.id)}`;
    } catch (error) {
      fail(error);
    }
  });
  const node = h(
    "section",
    { class: "card character-chats-box", "aria-label": t("Chats") },
    h("div", { class: "side-head" }, h("h2", {}, t("Chats")), count),
    h("div", { class: "row" }, newChat, button(t("Import chat (.jsonl)"), () => picker.click())),
    picker,
    list,
  );
  return { node, load, reload };
}
