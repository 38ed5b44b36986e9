// The character editor (#/character/<id>, #/character/new): the card's fields
// (character/form.js), the avatar (character/avatar.js), the linked lorebook, the character's
// chats (character/chats.js), and the actions on the whole card: save, chat, duplicate,
// export (PNG, JSON V2/V3, CHARX), delete.
//
// Saving sends the card JSON as it was read with the edited fields changed, so whatever the
// form does not show (third-party extensions, V1 copies, the embedded book) is kept. A value
// the server refuses is named next to its field and in an alert; the form keeps what was typed.

import { ApiError, api, isStale } from "../api.js";
import { button, h } from "../dom.js";
import { createAlerts } from "../alerts.js";
import { errorText, toast } from "../toast.js";
import { createChat } from "../chat/auto-run.js";
import { createAvatar } from "./avatar.js";
import { createChats } from "./chats.js";
import { confirmDialog, download } from "./files.js";
import { createCardForm } from "./form.js";
import { t } from "../i18n.js";
import { loadWriter } from "./writer.js";

const EXPORTS = [
  ["png", "v2", t("PNG card")],
  ["json", "v2", t("JSON card (V2)")],
  ["json", "v3", t("JSON card (V3)")],
  ["charx", "v3", t("CHARX archive")],
];

const NEW_CARD = {
  spec: "chara_card_v2",
  spec_version: "2.0",
  data: {
    name: "",
    description: "",
    personality: "",
    scenario: "",
    first_mes: "",
    mes_example: "",
    creator_notes: "",
    system_prompt: "",
    post_history_instructions: "",
    alternate_greetings: [],
    tags: [],
    creator: "",
    character_version: "",
    extensions: { talkativeness: 0.5, fav: false, world: "", depth_prompt: { prompt: "", depth: 4, role: "system" } },
  },
};

const enc = encodeURIComponent;

export async function showCharacter(view, ref) {
  const isNew = !ref || ref === "new";
  let record = null;
  if (!isNew) {
    try {
      record = await api("GET", `/characters/${enc(ref)}`);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      view.append(
        h("h1", {}, t("No such character")),
        h("p", {}, t("There is no character {ref}. ", { ref }), h("a", { href: "#/" }, t("Back to the characters"))),
      );
      return undefined;
    }
  }
  let card = record ? record.data : structuredClone(NEW_CARD);
  const [books, linkedNow] = await Promise.all([
    api("GET", "/lorebooks?limit=1000"),
    record ? api("GET", `/characters/${enc(record.id)}/lorebooks`) : Promise.resolve([]),
  ]);
  let linked = linkedNow;
  const writer = await loadWriter(card);

  const alerts = createAlerts();
  const fail = (error, retry = null, retryLabel = null) => {
    const options = !retry ? {} : retryLabel ? { actions: [{ label: retryLabel, run: retry }] } : { retry };
    alerts.show(errorText(error), options);
  };
  const title = h("h1", {}, record ? record.name : "New character");
  const form = createCardForm(card);

  // -- the avatar --------------------------------------------------------------------------
  const avatar = createAvatar({
    name: () => form.nameInput.value.trim() || (record && record.name) || "",
    // a card without an image (a JSON import) shows its initial: no request for a missing one
    url: record && record.has_avatar ? `/characters/${enc(record.id)}/avatar?v=${Date.parse(record.updated)}` : "",
    upload: record ? uploadAvatar : null,
    remove: async () => {
      await api("DELETE", `/characters/${enc(record.id)}/avatar`);
      toast(t("Avatar removed"), "info");
    },
    fail: (error) => fail(error),
  });

  // the initial shown while there is no avatar follows the name as it is typed
  form.nameInput.addEventListener("input", () => avatar.refresh());

  async function uploadAvatar(blob, id = record.id) {
    const line = await api("PUT", `/characters/${enc(id)}/avatar`, blob);
    toast(t("Avatar saved"), "info");
    return line.avatar_url;
  }

  // -- the linked lorebook -----------------------------------------------------------------
  // The choice starts at the first linked book, else at the one the card's
  // data.extensions.world names (as SillyTavern links a book; a book not stored stays named,
  // and the card keeps it unless another choice is made).
  const MISSING = "missing:";
  const startExt = (card.data && card.data.extensions) || {};
  const world = typeof startExt.world === "string" ? startExt.world : "";
  const worldBook = books.items.find((b) => b.name === world);
  const bookSelect = h(
    "select",
    {},
    h("option", { value: "" }, t("None")),
    books.items.map((b) => h("option", { value: b.id }, b.name)),
    world && !worldBook ? h("option", { value: MISSING }, t("{world} (not stored)", { world })) : null,
  );
  let firstChoice = linked.length ? linked[0].id : worldBook ? worldBook.id : world ? MISSING : "";
  bookSelect.value = firstChoice;
  const openBook = h("a", { href: "#/lorebooks" }, t("Open lorebook"));
  const syncBookLink = () => {
    openBook.hidden = !bookSelect.value || bookSelect.value === MISSING;
    openBook.href = `#/lorebook/${enc(bookSelect.value)}`;
  };
  bookSelect.addEventListener("change", syncBookLink);
  syncBookLink();
  const embedded = card.data && card.data.character_book;
  const embeddedCount = embedded && embedded.entries ? Object.keys(embedded.entries).length : 0;
  const booksBox = h(
    "section",
    { class: "card books-box", "aria-label": t("Lorebook") },
    h("h2", {}, t("Lorebook")),
    h("label", { class: "field" }, h("span", { class: "label" }, t("Linked lorebook")), bookSelect),
    openBook,
    linked.length > 1
      ? h("p", { class: "muted" }, t("Also linked: {names}", { names: linked.slice(1).map((b) => b.name).join(", ") }))
      : null,
    embedded
      ? h(
          "p",
          { class: "muted" },
          t("The card embeds a lorebook ({embeddedCount} entries); it was stored as a lorebook and linked when imported. An export writes the linked book's edits back into the card.", { embeddedCount }),
        )
      : null,
  );

  // The links the choice makes: the chosen book first, the others kept after it.
  function wantedBooks() {
    if (bookSelect.value === firstChoice) return linked.map((b) => b.id);
    const chosen = bookSelect.value === MISSING ? "" : bookSelect.value;
    const rest = linked.slice(1).map((b) => b.id).filter((id) => id !== chosen);
    return chosen ? [chosen, ...rest] : rest;
  }

  async function saveBooks(id) {
    const wanted = wantedBooks();
    if (wanted.join("\n") === linked.map((b) => b.id).join("\n")) return;
    linked = await api("PUT", `/characters/${enc(id)}/lorebooks`, { books: wanted });
  }

  // -- save --------------------------------------------------------------------------------
  // Whether the form differs from the card as saved (the lorebook choice included).
  function isDirty() {
    return JSON.stringify(writer.apply(form.read(card))) !== JSON.stringify(card) || wantedBooks().join() !== linked.map((b) => b.id).join();
  }

  function showFieldError(path, message) {
    const clean = message.replace(/^.*?field '[^']*': /, "");
    const label = form.showError(path, clean);
    alerts.show(label ? t("Not saved: {label}: {message}", { label, message: clean }) : t("Not saved: {message}", { message: clean }));
  }

  const saveButton = button(t("Save"), () => save(), { class: "primary save" });

  async function save() {
    form.clearErrors();
    const bad = form.check();
    if (bad) {
      showFieldError(bad[0], bad[1]);
      return;
    }
    const body = writer.apply(form.read(card));
    const ext = body.data.extensions;
    const choice = bookSelect.value;
    if (choice !== firstChoice && choice !== MISSING) {
      const chosen = books.items.find((b) => b.id === choice);
      if (chosen) ext.world = chosen.name;
      else if ("world" in ext) ext.world = "";
    }
    saveButton.disabled = true;
    let saved = false;
    try {
      if (isNew) {
        const made = await api("POST", "/characters", body);
        const pending = avatar.pending();
        if (pending) await uploadAvatar(pending, made.id).catch((error) => fail(error));
        await saveBooks(made.id).catch((error) => fail(error));
        toast(t("Created {name}", { name: made.name }), "info");
        window.location.hash = `#/character/${enc(made.id)}`;
        return;
      }
      const before = record.name;
      record = await api("PUT", `/characters/${enc(record.id)}`, body, { ifMatch: record.revision });
      card = record.data;
      writer.saved(card);
      await saveBooks(record.id);
      firstChoice = choice;
      title.textContent = record.name;
      toast(record.name !== before ? t("Saved; renamed to {name}", { name: record.name }) : t("Saved"), "info");
      if (record.name !== before) await chats.reload();
      saved = true;
    } catch (error) {
      const field = error instanceof ApiError && error.body && error.body.field;
      if (isStale(error)) refuseStale();
      else if (field) showFieldError(field, error.message);
      else if (error instanceof ApiError && error.status === 409) showFieldError("data.name", error.message);
      else fail(error, save);
    } finally {
      saveButton.disabled = false;
    }
    return saved;
  }

  // Another tab or device saved the card since this one read it: nothing was overwritten;
  // the form keeps what was typed until the user reloads the card.
  function refuseStale() {
    alerts.show(
      t("{name} was changed in another tab or device, so this save was refused. Reload to see the current card (your edits here are then lost: copy what you want to keep).", { name: record.name }),
      { actions: [{ label: t("Reload character"), run: () => window.location.reload() }] },
    );
  }

  // Chat and Duplicate act on the card as shown: unsaved edits are saved first.
  const savedFirst = (action) => async () => {
    if (isDirty() && !(await save())) return;
    await action();
  };

  // -- the other actions -------------------------------------------------------------------
  async function openChat() {
    try {
      const query = new URLSearchParams({ character: record.id, limit: 1 });
      const found = await api("GET", `/chats?${query}`);
      const chat = found.items[0] || (await createChat({ character: record.id }));
      window.location.hash = `#/chat/${enc(chat.id)}`;
    } catch (error) {
      fail(error);
    }
  }

  async function duplicate() {
    try {
      const copy = await api("POST", `/characters/${enc(record.id)}/duplicate`, {});
      toast(t("Duplicated as {name}", { name: copy.name }), "info");
      window.location.hash = `#/character/${enc(copy.id)}`;
    } catch (error) {
      fail(error);
    }
  }

  const exportSelect = h(
    "select",
    {},
    EXPORTS.map(([format, spec, label], i) => h("option", { value: String(i) }, label)),
  );
  async function exportCard() {
    const [format, spec] = EXPORTS[Number(exportSelect.value)];
    const query = new URLSearchParams({ format, spec });
    try {
      await download(`/export/character/${enc(record.id)}?${query}`, `${record.name}.${format}`);
    } catch (error) {
      fail(error);
    }
  }

  async function remove() {
    const total = await chats.load().catch(() => 0);
    const answer = await confirmDialog(
      t("Delete {name}?", { name: record.name }),
      t("The card and its avatar cannot be brought back."),
      total ? { option: { label: total === 1 ? t("Also delete its chat") : t("Also delete its {total} chats", { total }) } } : {},
    );
    if (!answer.ok) return;
    try {
      await api("DELETE", `/characters/${enc(record.id)}?with_chats=${answer.checked}`);
      toast(t("Deleted {name}", { name: record.name }), "info");
      window.location.hash = "#/";
    } catch (error) {
      fail(error);
    }
  }

  const chats = record ? createChats({ id: record.id, name: record.name }, fail) : null;
  const actions = record
    ? [
        button(t("Chat"), savedFirst(openChat)),
        button(t("Duplicate"), savedFirst(duplicate)),
        h("span", { class: "export" }, h("label", {}, t("Export as "), exportSelect), button(t("Export"), exportCard)),
        button(t("Delete"), remove, { class: "danger" }),
      ]
    : [h("a", { href: "#/" }, t("Cancel"))];

  const onKey = (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === "s") {
      event.preventDefault();
      save();
    }
  };
  view.addEventListener("keydown", onKey);
  // closing the tab with unsaved edits asks first
  const onUnload = (event) => {
    if (isDirty()) event.preventDefault();
  };
  window.addEventListener("beforeunload", onUnload);

  view.append(
    h(
      "div",
      { class: "character-editor" },
      h("div", { class: "editor-head" }, h("a", { href: "#/" }, t("Characters")), title),
      h("div", { class: "toolbar editor-bar" }, saveButton, ...actions),
      alerts.node,
      h(
        "div",
        { class: "editor-grid" },
        h("div", { class: "editor-side" }, avatar.node, booksBox, writer.node, chats ? chats.node : null),
        h("form", { class: "editor-main", "aria-label": t("Card") }, form.node),
      ),
    ),
  );
  view.querySelector("form.editor-main").addEventListener("submit", (event) => {
    event.preventDefault();
    save();
  });
  if (chats) await chats.reload();
  if (isNew) form.nameInput.focus();
  return () => {
    view.removeEventListener("keydown", onKey);
    window.removeEventListener("beforeunload", onUnload);
  };
}
