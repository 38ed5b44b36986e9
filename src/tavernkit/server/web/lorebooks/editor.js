// One lorebook (#/lorebook/<id>[?chat=<chat id>]): its name (rename in place), duplicate,
// export and delete; "Used by" (lorebooks/bindings.js); its entries (lorebooks/entries.js)
// with a save bar that says how many entries have unsaved edits; "Test this text"
// (lorebooks/tester.js). Leaving the page with unsaved edits asks first (a reload or a
// closed tab).

import { api } from "../api.js";
import { createAlerts } from "../alerts.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { deleteBook, duplicateBook, exportLink, renameInPlace } from "./book.js";
import { createBindings } from "./bindings.js";
import { createEntries } from "./entries.js";
import { createTester } from "./tester.js";
import { t } from "../i18n.js";

export async function showLorebook(view, ref, { params } = {}) {
  // the entries' lines (titles, keys, switches: no content), not the book's JSON: a
  // 20,000-entry book is 2 MB of lines against 36 MB whole
  const found = await api("GET", `/lorebooks/${encodeURIComponent(ref)}/entries`);
  const book = found.book;
  const alerts = createAlerts();

  const title = h("h1", {}, book.name);
  const titleSlot = h("div", { class: "title-slot" }, title);
  const showTitle = () => titleSlot.replaceChildren(title);
  const rename = () =>
    renameInPlace(titleSlot, book, {
      done(line) {
        book.name = line.name;
        title.textContent = line.name;
        showTitle();
        toast(t("Renamed to {name}", { name: line.name }), "info");
      },
      cancel: showTitle,
      fail: (error, plain) => alerts.show(plain || errorText(error)),
    });

  const bindings = createBindings(book, alerts, { chat: params && params.get("chat") });
  const unsaved = h("span", { class: "muted", role: "status" });
  const entries = createEntries(book, found, alerts, (count) => {
    unsaved.textContent = count ? (count === 1 ? t("1 entry has unsaved edits") : t("{count} entries have unsaved edits", { count })) : "";
  });
  const save = button(t("Save lorebook"), () => entries.save(), { class: "primary" });

  const actions = h(
    "div",
    { class: "row book-actions" },
    button(t("Rename"), rename),
    button(t("Duplicate"), async () => {
      try {
        const copy = await duplicateBook(book);
        toast(t("Duplicated as {name}", { name: copy.name }), "info");
        window.location.hash = `#/lorebook/${encodeURIComponent(copy.id)}`;
      } catch (error) {
        alerts.show(errorText(error));
      }
    }),
    exportLink(book),
    button(
      t("Delete"),
      async () => {
        try {
          if (await deleteBook(book, bindings.usedBy())) {
            toast(t("Deleted {name}", { name: book.name }), "info");
            window.location.hash = "#/lorebooks";
          }
        } catch (error) {
          alerts.show(errorText(error));
        }
      },
      { class: "danger" },
    ),
  );

  const warn = (event) => {
    if (entries.dirtyCount()) event.preventDefault();
  };
  window.addEventListener("beforeunload", warn);

  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/lorebooks" }, t("All lorebooks"))),
    h("div", { class: "toolbar book-head" }, titleSlot, actions),
    alerts.node,
    bindings.node,
    entries.node,
    h("div", { class: "save-bar" }, save, unsaved),
    createTester(book, alerts),
  );
  return () => window.removeEventListener("beforeunload", warn);
}
