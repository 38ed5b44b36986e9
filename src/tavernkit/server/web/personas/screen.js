// Personas (#/personas[/<id>][?chat=<chat id>]): who the user speaks as. The list (avatar,
// name, whether it is the default or locked to characters), a new persona by name, and the
// editor of the one picked (personas/editor.js). Opened from a chat (?chat=), the editor can
// lock a persona to that chat too.

import { createAlerts } from "../alerts.js";
import { api, isStale } from "../api.js";
import { h } from "../dom.js";
import { errorText } from "../toast.js";
import { avatar, field } from "./common.js";
import { createEditor } from "./editor.js";
import { t } from "../i18n.js";

// Every persona with its JSON (one request each: a persona list is short), the selections
// (default, character locks) and the characters by id.
async function loadAll() {
  const [page, selections, characters] = await Promise.all([
    api("GET", "/personas?limit=500"),
    api("GET", "/settings/selections"),
    api("GET", "/characters?limit=500"),
  ]);
  const personas = await Promise.all(
    page.items.map(async (line) => {
      const record = await api("GET", `/personas/${encodeURIComponent(line.id)}`);
      return { id: line.id, name: line.name, updated: line.updated, data: record.data, revision: record.revision };
    }),
  );
  return { personas, selections, characters: characters.items };
}

export async function showPersonas(view, ref, params = new URLSearchParams()) {
  const chatId = params.get("chat") || "";
  const query = chatId ? `?${new URLSearchParams({ chat: chatId })}` : "";
  const alerts = createAlerts();
  const list = h("ul", { class: "persona-list", "aria-label": t("Personas") });
  const editorBox = h("div", { class: "persona-editor" });
  const chat = chatId ? await api("GET", `/chats/${encodeURIComponent(chatId)}`) : null;
  let state = await loadAll();

  // a save refused because another tab or device saved the persona since: offer a reload
  // (the form keeps what was typed until then), not a Retry that would be refused again
  const fail = (error, retry) =>
    isStale(error)
      ? alerts.show(
          t("This persona was changed in another tab or device, so your save was refused. Reload to see the current persona (copy your text first to keep it)."),
          { actions: [{ label: t("Reload persona"), run: () => reload() }] },
        )
      : alerts.show(errorText(error), retry ? { retry } : {});

  async function reload() {
    state = await loadAll();
    draw();
  }

  // a persona the editor saved: its line in the list shows the stored name, the editor stays
  function saved(persona) {
    state.personas = state.personas.map((p) => (p.id === persona.id ? persona : p));
    drawList();
  }

  function badges(persona) {
    const sel = state.selections;
    const out = [];
    if (sel.persona === persona.id) out.push(t("default"));
    const locked = state.characters.filter((c) => sel.character_personas[c.id] === persona.id).map((c) => c.name);
    if (locked.length) out.push(t("locked to {names}", { names: locked.join(", ") }));
    return out.length ? h("small", { class: "muted" }, out.join(" · ")) : null;
  }

  function draw() {
    drawList();
    const current = state.personas.find((p) => p.id === ref);
    if (current) {
      editorBox.replaceChildren(createEditor(current, { state, chat, reload, saved, fail, leave: () => (window.location.hash = `#/personas${query}`) }));
    } else {
      editorBox.replaceChildren(h("p", { class: "muted" }, ref ? t("That persona is gone.") : t("Pick a persona to edit it, or add one.")));
    }
  }

  function drawList() {
    list.replaceChildren(
      ...state.personas.map((p) =>
        h(
          "li",
          { class: p.id === ref ? "current" : "", dataset: { persona: p.id } },
          h(
            "a",
            { href: `#/personas/${encodeURIComponent(p.id)}${query}`, "aria-current": p.id === ref ? "page" : undefined },
            avatar(p),
            h("span", { class: "persona-line" }, h("span", { class: "name" }, p.name), badges(p)),
          ),
        ),
      ),
    );
    if (!state.personas.length) list.append(h("li", { class: "muted" }, t("No personas yet: add one below.")));
  }

  const name = h("input", { required: true, maxlength: 200, autocomplete: "off" });
  const form = h(
    "form",
    { class: "row", "aria-label": t("New persona") },
    field(t("New persona's name"), name, "field grow"),
    h("button", { type: "submit" }, t("Add persona")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const made = async () => {
      const record = await api("POST", "/personas", { name: name.value.trim(), description: "" });
      name.value = "";
      window.location.hash = `#/personas/${encodeURIComponent(record.id)}${query}`;
    };
    try {
      await made();
    } catch (error) {
      fail(error);
    }
  });

  draw();
  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, t("Personas")),
      chat ? h("a", { href: `#/chat/${encodeURIComponent(chat.id)}` }, t("Back to {name}", { name: chat.name })) : null,
    ),
    alerts.node,
    h(
      "div",
      { class: `personas-screen${ref ? " editing" : ""}` },
      h("section", { class: "card persona-index", "aria-label": t("All personas") }, list, form),
      h("section", { class: "card", "aria-label": t("Persona") }, editorBox),
    ),
  );
  if (!ref) name.focus();
}
