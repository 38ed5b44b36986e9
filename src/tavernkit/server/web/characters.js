// The character grid: thumbnails a page at a time, search by name, and import by dropping
// files anywhere on the grid (or choosing them): cards (PNG, CHARX, JSON), lorebooks, presets,
// chats... the server recognises each by its content.

import { createAlerts } from "./alerts.js";
import { ApiError, api } from "./api.js";
import { errorText, reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";

const PAGE = 24;

export async function showCharacters(view) {
  let offset = 0;
  const alerts = createAlerts();
  const search = h("input", {
    type: "search",
    placeholder: "Search characters",
    "aria-label": "Search characters",
  });
  const picker = h("input", { type: "file", multiple: true, hidden: true });
  const grid = h("ul", { class: "grid", "aria-label": "Characters" });
  const pager = h("div", { class: "pager" });
  const drop = h(
    "section",
    { class: "dropzone", "aria-label": "Import files" },
    h("p", {}, "Drop character cards or other files here to import them, or "),
    button("choose files", () => picker.click()),
  );

  async function load() {
    const q = search.value.trim();
    const query = new URLSearchParams({ offset, limit: PAGE });
    if (q) query.set("q", q);
    const page = await api("GET", `/characters?${query}`);
    grid.replaceChildren(...page.items.map(tile));
    if (!page.items.length && !q) {
      grid.append(
        h(
          "li",
          { class: "empty" },
          "No characters yet. Import a card above, or ",
          button("add the demo character (Wren)", () =>
            api("POST", "/ui/demo-character").then(load).catch(reportError),
          ),
        ),
      );
    } else if (!page.items.length) {
      grid.append(h("li", { class: "empty" }, "No character matches."));
    }
    pager.replaceChildren(
      button("Previous", () => turn(-PAGE), { disabled: offset === 0 }),
      h("span", {}, `${page.total ? offset + 1 : 0}–${offset + page.items.length} of ${page.total}`),
      button("Next", () => turn(PAGE), { disabled: offset + PAGE >= page.total }),
    );
  }

  function turn(delta) {
    offset = Math.max(0, offset + delta);
    load().catch(reportError);
  }

  // One request a file, so one file that cannot be imported (unreadable, or a name taken by a
  // different record) leaves the others imported, and a name conflict is the user's choice.
  async function importFiles(files) {
    const done = [];
    for (const file of files) {
      try {
        done.push(...(await importFile(file, false)));
      } catch (error) {
        reportImportError(file, error);
      }
    }
    if (done.length) await imported(done);
  }

  async function importFile(file, replace) {
    const form = new FormData();
    form.append("file", file, file.name);
    return api("POST", `/import${replace ? "?replace=true" : ""}`, form);
  }

  function reportImportError(file, error) {
    const taken = error instanceof ApiError && error.body && error.body.type === "NameTaken";
    const replace = async () => {
      try {
        await imported(await importFile(file, true));
      } catch (again) {
        reportImportError(file, again);
      }
    };
    alerts.show(
      taken ? `${error.message}. Replace it with the file's?` : `${file.name}: ${errorText(error)}`,
      taken ? { actions: [{ label: "Replace", run: replace }] } : {},
    );
  }

  async function imported(results) {
    const verbs = { imported: "Imported", replaced: "Replaced", unchanged: "Already there:", kept: "Kept" };
    const names = new Map(); // status -> names, in the order met
    for (const r of results) names.set(r.status, [...(names.get(r.status) || []), r.name]);
    const lines = [...names].map(([status, list]) => `${verbs[status] || status} ${list.join(", ")}`);
    toast(lines.join("; "), "info");
    await load();
  }

  let searchTimer;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      offset = 0;
      load().catch(reportError);
    }, 200);
  });
  picker.addEventListener("change", () => importFiles([...picker.files]));
  for (const type of ["dragenter", "dragover"]) {
    view.addEventListener(type, (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
  }
  view.addEventListener("dragleave", () => drop.classList.remove("over"));
  view.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    importFiles([...event.dataTransfer.files]);
  });

  view.append(h("div", { class: "toolbar" }, h("h1", {}, "Characters"), search), drop, alerts.node, picker, grid, pager);
  await load();
}

function tile(character) {
  const image = h("img", { src: character.thumbnail_url, alt: "", loading: "lazy", width: 100, height: 150 });
  // A card without an image (a JSON import) shows its initial instead of a broken image.
  image.addEventListener("error", () => {
    image.replaceWith(h("span", { class: "initial", "aria-hidden": "true" }, character.name.slice(0, 1)));
  });
  const open = button(
    [image, h("span", { class: "name" }, character.name)],
    () => openLatestChat(character).catch(reportError),
    { class: "tile", "aria-label": `Chat with ${character.name}` },
  );
  return h("li", {}, open);
}

async function openLatestChat(character) {
  const chats = await api("GET", `/chats?${new URLSearchParams({ character: character.id, limit: 1 })}`);
  const chat = chats.items[0] || (await api("POST", "/chats", { character: character.id }));
  window.location.hash = `#/chat/${encodeURIComponent(chat.id)}`;
}
