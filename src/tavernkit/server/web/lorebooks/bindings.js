// "Used by": where a book is bound, the places a turn reads books from (every chat, a chat,
// a character, a persona), each with Remove, and a picker to bind it somewhere more.
// `chat`: a chat id to offer first (#/lorebook/<id>?chat=<chat id>).

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText } from "../toast.js";
import { bindingLabel, bookPath, chatName } from "./book.js";
import { t } from "../i18n.js";

const SCOPES = [
  ["global", t("Every chat (global)")],
  ["chat", t("A chat")],
  ["character", t("A character")],
  ["persona", t("A persona")],
];

// What each scope offers to bind to: [value, label] pairs.
const TARGETS = {
  async chat() {
    const page = await api("GET", "/chats?limit=200");
    return page.items.map((c) => [c.id, chatName(c.character_name, c.name)]);
  },
  async character() {
    const page = await api("GET", "/characters?limit=200");
    return page.items.map((c) => [c.id, c.name]);
  },
  async persona() {
    const page = await api("GET", "/personas?limit=200");
    return page.items.map((p) => [p.id, p.name]);
  },
};

const NOTES = {
  global: t("Its entries can fire in every chat."),
  chat: t("A chat has one chat lorebook: this one replaces the chat's."),
  character: t("Its entries can fire in every chat with this character."),
  persona: t("A persona has one lorebook: this one replaces the persona's. It is read while you speak as that persona."),
};

export function createBindings(book, alerts, { chat = null, onChange = () => {} } = {}) {
  let usedBy = [];
  const list = h("ul", { class: "bindings" });
  const scope = h("select", {}, SCOPES.map(([value, label]) => h("option", { value }, label)));
  const target = h("select", {});
  const targetField = h("label", { class: "field" }, t("Which"), target);
  const note = h("p", { class: "muted" });
  const bind = button(t("Bind"), () => add());

  function show(found) {
    usedBy = found.used_by;
    list.replaceChildren(
      ...(usedBy.length
        ? usedBy.map((b) =>
            h(
              "li",
              { dataset: { scope: b.scope } },
              h("span", {}, bindingLabel(b, { link: true })),
              button(t("Remove"), () => remove(b)),
            ),
          )
        : [h("li", { class: "muted" }, t("Bound nowhere: its entries fire only in the tester below."))]),
    );
    onChange(usedBy);
  }

  async function pickScope() {
    const kind = scope.value;
    note.textContent = NOTES[kind];
    targetField.hidden = kind === "global";
    if (kind === "global") return;
    target.replaceChildren(h("option", { value: "" }, t("loading…")));
    try {
      const options = await TARGETS[kind]();
      target.replaceChildren(
        ...(options.length
          ? options.map(([value, label]) => h("option", { value }, label))
          : [h("option", { value: "" }, { chat: t("no chats yet"), character: t("no characters yet"), persona: t("no personas yet") }[kind])]),
      );
      if (kind === "chat" && chat && options.some(([value]) => value === chat)) target.value = chat;
    } catch (error) {
      target.replaceChildren();
      alerts.show(errorText(error), { retry: pickScope });
    }
  }

  async function add() {
    const body = { scope: scope.value };
    if (scope.value !== "global") {
      if (!target.value) return;
      body.target = target.value;
    }
    try {
      show(await api("POST", `${bookPath(book)}/bindings`, body));
    } catch (error) {
      alerts.show(errorText(error), { retry: add });
    }
  }

  async function remove(b) {
    const query = b.scope === "global" ? "" : `?${new URLSearchParams({ target: b.id })}`;
    try {
      show(await api("DELETE", `${bookPath(book)}/bindings/${b.scope}${query}`));
    } catch (error) {
      alerts.show(errorText(error), { retry: () => remove(b) });
    }
  }

  async function load() {
    try {
      show(await api("GET", `${bookPath(book)}/bindings`));
    } catch (error) {
      alerts.show(errorText(error), { retry: load });
    }
  }

  scope.addEventListener("change", pickScope);
  if (chat) scope.value = "chat";
  pickScope();
  load();

  const node = h(
    "section",
    { class: "card used-by", "aria-label": t("Used by") },
    h("h2", {}, t("Used by")),
    list,
    h("div", { class: "bind-row" }, h("label", { class: "field" }, t("Bind to"), scope), targetField, bind),
    note,
  );
  return { node, usedBy: () => usedBy };
}
