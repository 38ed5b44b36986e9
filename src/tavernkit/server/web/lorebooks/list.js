// The lorebooks (#/lorebooks): create an empty one by name, import files (SillyTavern's
// world-info JSON and the other formats the server reads; a name that is taken asks to
// replace), filter by name, and per book: where it is bound, rename in place, duplicate,
// export, delete.

import { ApiError, api } from "../api.js";
import { createAlerts } from "../alerts.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { bindingText, deleteBook, duplicateBook, exportLink, nameError, renameInPlace } from "./book.js";
import { t } from "../i18n.js";

async function allBooks() {
  const books = [];
  for (;;) {
    const page = await api("GET", `/lorebooks?offset=${books.length}&limit=200`);
    books.push(...page.items);
    if (!page.items.length || books.length >= page.total) return books;
  }
}

export async function showLorebooks(view) {
  const alerts = createAlerts();
  let books = await allBooks();
  let usedBy = {}; // book id -> bindings (filled in after the list shows)
  const list = h("ul", { class: "book-list", "aria-label": t("Lorebooks") });
  const filter = h("input", { type: "search" });

  const byName = (a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: "base" });

  function usedText(book) {
    const found = usedBy[book.id];
    if (found === undefined) return "";
    return found.length ? t("Used by: {names}", { names: found.map(bindingText).join(" · ") }) : t("Bound nowhere");
  }

  function row(book) {
    const name = h("a", { href: `#/lorebook/${encodeURIComponent(book.id)}`, class: "book-name" }, book.name);
    const nameSlot = h("div", { class: "name-slot" }, name);
    const item = h("li", { class: "book card", dataset: { id: book.id } });
    const rename = () =>
      renameInPlace(nameSlot, book, {
        async done(line) {
          toast(t("Renamed to {name}", { name: line.name }), "info");
          await refresh();
        },
        cancel: () => nameSlot.replaceChildren(name),
        fail: (error, plain) => alerts.show(plain || errorText(error)),
      });
    item.append(
      nameSlot,
      h("span", { class: "used muted" }, usedText(book)),
      h(
        "div",
        { class: "row book-actions" },
        button(t("Rename"), rename),
        button(t("Duplicate"), async () => {
          try {
            const copy = await duplicateBook(book);
            toast(t("Duplicated as {name}", { name: copy.name }), "info");
            await refresh();
          } catch (error) {
            alerts.show(errorText(error));
          }
        }),
        exportLink(book),
        button(
          t("Delete"),
          async () => {
            try {
              if (await deleteBook(book, usedBy[book.id] || [])) {
                toast(t("Deleted {name}", { name: book.name }), "info");
                await refresh();
              }
            } catch (error) {
              alerts.show(errorText(error));
            }
          },
          { class: "danger" },
        ),
      ),
    );
    return item;
  }

  function render() {
    const needle = filter.value.trim().toLowerCase();
    const shown = books.filter((b) => !needle || b.name.toLowerCase().includes(needle)).sort(byName);
    list.replaceChildren(
      ...(shown.length
        ? shown.map(row)
        : [h("li", { class: "muted" }, books.length ? t("No lorebook has that name.") : t("No lorebooks yet: create or import one."))]),
    );
  }

  async function loadBindings() {
    try {
      usedBy = await api("GET", "/lorebook-bindings");
      for (const book of books) usedBy[book.id] ??= [];
      for (const item of list.querySelectorAll("li.book")) {
        const book = books.find((b) => b.id === item.dataset.id);
        if (book) item.querySelector(".used").textContent = usedText(book);
      }
    } catch (error) {
      alerts.show(errorText(error), { retry: loadBindings });
    }
  }

  async function refresh() {
    try {
      books = await allBooks();
      render();
      await loadBindings();
    } catch (error) {
      alerts.show(errorText(error), { retry: refresh });
    }
  }

  filter.addEventListener("input", render);

  // -- create and import -------------------------------------------------------------------

  const newName = h("input", { placeholder: t("e.g. The coast") });
  const create = async () => {
    const name = newName.value.trim();
    if (!name) {
      newName.focus();
      return;
    }
    try {
      const made = await api("POST", "/lorebooks", { name, entries: {} });
      window.location.hash = `#/lorebook/${encodeURIComponent(made.id)}`;
    } catch (error) {
      alerts.show(nameError(error, name) || errorText(error));
    }
  };
  newName.addEventListener("keydown", (event) => {
    if (event.key === "Enter") create();
  });

  const files = h("input", { type: "file", accept: ".json,application/json", multiple: true, class: "visually-hidden" });
  async function importFile(file, replace = false) {
    const form = new FormData();
    form.append("file", file, file.name);
    try {
      const done = await api("POST", `/import${replace ? "?replace=true" : ""}`, form);
      toast(t("Imported {names}", { names: done.map((r) => r.name).join(", ") }), "info");
      await refresh();
    } catch (error) {
      const taken = error instanceof ApiError && error.body && error.body.type === "NameTaken";
      alerts.show(`${file.name}: ${errorText(error)}`, {
        actions: taken ? [{ label: t("Replace"), run: () => importFile(file, true) }] : [],
        retry: taken ? undefined : () => importFile(file, replace),
      });
    }
  }
  files.addEventListener("change", async () => {
    for (const file of [...files.files]) await importFile(file);
    files.value = "";
  });

  render();
  view.append(
    h("div", { class: "toolbar" }, h("h1", {}, t("Lorebooks"))),
    h(
      "div",
      { class: "book-tools" },
      h("label", { class: "field" }, t("New lorebook name"), newName),
      button(t("Create"), create, { class: "primary" }),
      h("label", { class: "button file-button" }, t("Import lorebooks"), files),
      h("label", { class: "field grow" }, t("Filter lorebooks"), filter),
    ),
    alerts.node,
    list,
  );
  loadBindings();
}
