// One persona's editor: its avatar (upload, remove), name, description and where the
// description goes (SillyTavern's positions: in the prompt, top or bottom of the author's
// note, in chat at a depth with a role, or nowhere), its lorebook; and who speaks as it
// without picking it: the default persona, the characters it is locked to, and (opened from
// a chat) that chat. Saved whole with PUT; the locks are saved as they are clicked.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { toast } from "../toast.js";
import { POSITIONS, avatar, field } from "./common.js";
import { t } from "../i18n.js";

const ROLES = [
  [0, t("System")],
  [1, t("User")],
  [2, t("Assistant")],
];

function options(pairs, current) {
  return pairs.map(([value, label]) => h("option", { value, selected: String(value) === String(current) }, label));
}

// `ctx`: {state: {personas, selections, characters}, chat (or null), reload, saved, fail, leave}
export function createEditor(persona, ctx) {
  const data = structuredClone(persona.data);
  const { selections, characters } = ctx.state;
  const url = `/personas/${encodeURIComponent(persona.id)}`;

  // a change the server refused stays on screen with a Retry; a reload shows what is stored
  const act = (action) => async () => {
    try {
      await action();
    } catch (error) {
      ctx.fail(error, act(action));
    }
  };

  // -- the avatar ---------------------------------------------------------------------------
  const picture = h("div", { class: "persona-picture" });
  const showAvatar = (who) => {
    removeAvatar.hidden = false;
    picture.replaceChildren(avatar(who, "large", () => (removeAvatar.hidden = true)));
  };
  const file = h("input", { type: "file", accept: "image/png,image/jpeg,image/gif,image/webp" });
  file.addEventListener(
    "change",
    act(async () => {
      if (!file.files.length) return;
      const form = new FormData();
      form.append("file", file.files[0], file.files[0].name);
      await api("PUT", `${url}/avatar`, form);
      file.value = "";
      showAvatar({ ...persona, updated: Date.now() });
      toast(t("Avatar saved"), "info");
    }),
  );
  const removeAvatar = button(
    t("Remove avatar"),
    act(async () => {
      await api("DELETE", `${url}/avatar`);
      showAvatar({ name: persona.name });
      toast(t("Avatar removed"), "info");
    }),
  );
  showAvatar(persona);

  // -- the persona's JSON -------------------------------------------------------------------
  const name = h("input", { value: data.name || "", required: true, maxlength: 200 });
  const description = h("textarea", { rows: 6 });
  description.value = data.description || "";
  const knownPosition = POSITIONS.some(([value]) => value === (data.position ?? 0));
  const position = h(
    "select",
    {},
    options(knownPosition ? POSITIONS : [...POSITIONS, [data.position, t("Position {position} (as stored)", { position: data.position })]], data.position ?? 0),
  );
  const depth = h("input", { type: "number", min: 0, step: 1, value: data.depth ?? 2 });
  const role = h("select", {}, options(ROLES, data.role ?? 0));
  const atDepth = h(
    "div",
    { class: "row" },
    field(t("Depth"), depth),
    field(t("Role"), role),
  );
  const syncDepth = () => {
    atDepth.hidden = position.value !== "4";
  };
  position.addEventListener("change", syncDepth);
  syncDepth();
  const lorebook = h("select", {}, h("option", { value: "" }, t("None")));
  api("GET", "/lorebooks?limit=500")
    .then((page) => {
      const names = page.items.map((b) => b.name);
      if (data.lorebook && !names.includes(data.lorebook)) names.push(data.lorebook);
      lorebook.append(...names.map((n) => h("option", { value: n, selected: n === data.lorebook }, n)));
    })
    .catch((error) => ctx.fail(error));

  const saveButton = h("button", { type: "submit", class: "primary" }, t("Save persona"));
  const form = h(
    "form",
    { class: "persona-form", "aria-label": t("Edit persona") },
    field(t("Name"), name),
    field(t("Description"), description),
    field(t("Description position"), position),
    atDepth,
    field(t("Persona lorebook"), lorebook),
    h("div", { class: "row" }, saveButton),
  );
  // One save at a time, each on the revision the last one stored: a second click while the
  // first is on its way would otherwise be refused as if another tab had saved.
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (saveButton.disabled) return;
    saveButton.disabled = true;
    act(async () => {
      const body = {
        ...data,
        name: name.value.trim(),
        description: description.value,
        position: Number(position.value),
        depth: Number(depth.value) || 0,
        role: Number(role.value),
        lorebook: lorebook.value || null,
      };
      const saved = await api("PUT", url, body, { ifMatch: persona.revision });
      persona.revision = saved.revision;
      toast(t("Persona saved"), "info");
      // the list shows the new name; the form stays as it is, so nothing typed since is lost
      ctx.saved({ ...persona, name: saved.name, data: saved.data, revision: saved.revision });
    })().finally(() => {
      saveButton.disabled = false;
    });
  });

  // -- who speaks as it ---------------------------------------------------------------------
  const isDefault = selections.persona === persona.id;
  const defaultBox = h("input", { type: "checkbox", checked: isDefault });
  defaultBox.addEventListener(
    "change",
    act(async () => {
      await api("PATCH", "/settings/selections", { persona: defaultBox.checked ? persona.id : null });
      toast(defaultBox.checked ? t("{name} is the default persona", { name: persona.name }) : t("No default persona"), "info");
      await ctx.reload();
    }),
  );

  const lockedTo = characters.filter((c) => selections.character_personas[c.id] === persona.id);
  const lockCharacter = (character, persona_) =>
    act(async () => {
      await api("PUT", `/characters/${encodeURIComponent(character.id)}/persona`, { persona: persona_ });
      toast(persona_ ? t("{name} is locked to {name2}", { name: persona.name, name2: character.name }) : t("{name} is unlocked", { name: character.name }), "info");
      await ctx.reload();
    });
  const others = characters.filter((c) => !lockedTo.includes(c));
  const characterPick = h(
    "select",
    {},
    others.map((c) => {
      const holder = ctx.state.personas.find((p) => p.id === selections.character_personas[c.id]);
      return h("option", { value: c.id }, holder ? t("{name} (now {name2})", { name: c.name, name2: holder.name }) : c.name);
    }),
  );
  const locks = h(
    "fieldset",
    { class: "persona-locks" },
    h("legend", {}, t("Who speaks as it")),
    field(t("Default persona (for chats without a lock of their own)"), defaultBox, "field check"),
    h(
      "ul",
      { class: "chat-list", "aria-label": t("Locked to characters") },
      lockedTo.length
        ? lockedTo.map((c) => h("li", {}, t("Locked to {name} ", { name: c.name }), button(t("Unlock {name}", { name: c.name }), lockCharacter(c, null))))
        : h("li", { class: "muted" }, t("Not locked to any character.")),
    ),
    others.length
      ? h(
          "div",
          { class: "row" },
          field(t("Character"), characterPick),
          button(t("Lock to character"), () => {
            const character = others.find((c) => c.id === characterPick.value);
            if (character) lockCharacter(character, persona.id)();
          }),
        )
      : null,
    ctx.chat ? chatLock(persona, ctx, act) : null,
  );

  const remove = button(
    t("Delete persona"),
    act(async () => {
      if (!window.confirm(t("Delete the persona {name}? Chats keep the messages sent as it.", { name: persona.name }))) return;
      // its locks go with it (a chat's lock to it is skipped from now on)
      for (const c of lockedTo) await api("PUT", `/characters/${encodeURIComponent(c.id)}/persona`, { persona: null });
      if (selections.persona === persona.id) await api("PATCH", "/settings/selections", { persona: null });
      await api("DELETE", url);
      toast(t("Deleted {name}", { name: persona.name }), "info");
      ctx.leave();
    }),
    { class: "danger" },
  );

  return h(
    "div",
    { class: "persona-edit" },
    h("div", { class: "persona-head" }, picture, h("div", {}, h("h2", {}, persona.name), field(t("Upload avatar"), file), removeAvatar)),
    form,
    locks,
    h("div", { class: "row" }, remove),
  );
}

// Lock (or unlock) the persona to the chat the screen was opened from.
function chatLock(persona, ctx, act) {
  const status = h("p", { class: "muted", role: "status" });
  const row = h("div", { class: "row" });
  const draw = (locked) => {
    const mine = locked.chat && locked.chat.id === persona.id;
    status.textContent = locked.chat
      ? t("This chat ({name}) is locked to {name2}.", { name: ctx.chat.name, name2: locked.chat.name })
      : t("This chat ({name}) has no persona of its own.", { name: ctx.chat.name });
    row.replaceChildren(
      mine
        ? button(t("Unlock this chat"), act(async () => draw(await api("PUT", chatUrl, { persona: null }))))
        : button(t("Lock to this chat"), act(async () => draw(await api("PUT", chatUrl, { persona: persona.id })))),
    );
  };
  const chatUrl = `/chats/${encodeURIComponent(ctx.chat.id)}/persona`;
  api("GET", chatUrl)
    .then(draw)
    .catch((error) => ctx.fail(error));
  return h("div", {}, status, row);
}
