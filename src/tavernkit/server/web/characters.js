// The character grid: thumbnails a page at a time, search by name, filter by tag (chips from
// the cards' tags) and favourites, sort (name, newest, recently edited or chatted, favourites
// first), a star on each tile (SillyTavern's favourite flag), "Edit" to open the card editor,
// "New character", and import by dropping files or folders anywhere on the grid (or choosing
// them): cards (PNG, CHARX, JSON), lorebooks, presets, chats... the server recognises each by
// its content.

import { createAlerts } from "./alerts.js";
import { api } from "./api.js";
import { createChat } from "./chat/auto-run.js";
import { droppedFiles, importEach } from "./import-files.js";
import { errorText, reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";
import { t } from "./i18n.js";

const PAGE = 24;
const SORT_KEY = "tavernkit.characters.sort";
const SORTS = [
  ["name", t("Name (A to Z)")],
  ["name_desc", t("Name (Z to A)")],
  ["newest", t("Newest")],
  ["updated", t("Recently edited")],
  ["chatted", t("Recently chatted")],
  ["fav", t("Favourites first")],
];

export async function showCharacters(view) {
  let offset = 0;
  const chosenTags = new Set(); // lower case
  const alerts = createAlerts();
  const search = h("input", {
    type: "search",
    placeholder: t("Search characters"),
    "aria-label": t("Search characters"),
  });
  const sort = h("select", {}, SORTS.map(([value, label]) => h("option", { value }, label)));
  sort.value = SORTS.some(([v]) => v === localStorage.getItem(SORT_KEY)) ? localStorage.getItem(SORT_KEY) : "name";
  const favOnly = h("input", { type: "checkbox" });
  const chips = h("div", { class: "tag-chips", role: "group", "aria-label": t("Filter by tag") });
  const picker = h("input", { type: "file", multiple: true, hidden: true, "aria-label": t("Files to import") });
  const folderPicker = h("input", { type: "file", webkitdirectory: true, hidden: true, "aria-label": t("Folder to import") });
  const grid = h("ul", { class: "grid", "aria-label": t("Characters") });
  const pager = h("div", { class: "pager" });
  const drop = h(
    "section",
    { class: "dropzone", "aria-label": t("Import files") },
    h("p", {}, t("Drop character cards, other files or folders here to import them, or ")),
    button(t("choose files"), () => picker.click()),
    " ",
    button(t("choose a folder"), () => folderPicker.click()),
  );
  const filtered = () => Boolean(search.value.trim() || chosenTags.size || favOnly.checked);

  function showChips(tags) {
    const items = tags.map((t) => chip(t.name, t.count));
    // a chosen tag no card carries any more stays shown, so it can be unchosen
    const shown = new Set(tags.map((t) => t.name.toLowerCase()));
    for (const key of chosenTags) if (!shown.has(key)) items.push(chip(key, 0));
    chips.replaceChildren(...items);
    chips.hidden = !items.length;
  }

  function chip(name, count) {
    const key = name.toLowerCase();
    const pressed = chosenTags.has(key);
    return button(
      [name, h("span", { class: "count", "aria-hidden": "true" }, String(count))],
      (event) => {
        if (chosenTags.has(key)) chosenTags.delete(key);
        else chosenTags.add(key);
        event.currentTarget.setAttribute("aria-pressed", String(chosenTags.has(key)));
        offset = 0;
        load().catch(reportError);
      },
      { class: "chip", "aria-pressed": String(pressed) },
    );
  }

  async function load({ tags = false } = {}) {
    const q = search.value.trim();
    const query = new URLSearchParams({ offset, limit: PAGE, sort: sort.value });
    if (q) query.set("q", q);
    for (const tag of chosenTags) query.append("tag", tag);
    if (favOnly.checked) query.set("fav", "true");
    if (tags) query.set("facets", "true");
    const page = await api("GET", `/characters?${query}`);
    if (page.tags) showChips(page.tags);
    grid.replaceChildren(...page.items.map((c) => tile(c, toggleFav)));
    if (!page.items.length && !filtered()) {
      grid.append(
        h(
          "li",
          { class: "empty" },
          t("No characters yet. Import a card above, "),
          h("a", { href: "#/character/new" }, t("make one")),
          t(", or "),
          button(t("add the demo character (Wren)"), () =>
            api("POST", "/ui/demo-character").then(() => load({ tags: true })).catch(reportError),
          ),
        ),
      );
      grid.append(await connectionHint());
    } else if (!page.items.length) {
      grid.append(h("li", { class: "empty" }, t("No character matches.")));
    }
    pager.replaceChildren(
      button(t("Previous"), () => turn(-PAGE), { disabled: offset === 0 }),
      h("span", {}, t("{value}–{value2} of {total}", { value: page.total ? offset + 1 : 0, value2: offset + page.items.length, total: page.total })),
      button(t("Next"), () => turn(PAGE), { disabled: offset + PAGE >= page.total }),
    );
    pager.hidden = !page.total; // "0–0 of 0" and two dead buttons say nothing to a new user
  }

  async function toggleFav(character, star) {
    star.disabled = true;
    try {
      const line = await api("PUT", `/characters/${encodeURIComponent(character.id)}/fav`, { fav: !character.fav });
      toast(line.fav ? t("{name} is a favourite", { name: line.name }) : t("{name} is no longer a favourite", { name: line.name }), "info");
      if (favOnly.checked || sort.value === "fav") await load();
      else {
        character.fav = line.fav;
        starLook(star, character);
      }
    } catch (error) {
      alerts.show(`${character.name}: ${errorText(error)}`);
    } finally {
      star.disabled = false;
    }
  }

  function turn(delta) {
    offset = Math.max(0, offset + delta);
    load().catch(reportError);
  }

  // A few files a request (import-files.js): one file that cannot be imported (unreadable, or
  // a name taken by a different record) leaves the others imported, and a name conflict is
  // the user's choice. A folder of thousands shows its progress as it goes.
  async function importFiles(files) {
    const wanted = [...files];
    if (!wanted.length) return;
    const label = h("span", {});
    const bar = h("progress", { max: wanted.length, value: 0, "aria-label": t("Import progress") });
    const status = h("p", { class: "import-progress", role: "status" }, bar, label);
    drop.after(status);
    const progress = (done, total) => {
      bar.max = total;
      bar.value = done;
      label.textContent = t("Importing {done} of {total} files", { done, total });
    };
    try {
      const { imported: done, failed } = await importEach(wanted, { progress });
      reportFailures(failed);
      if (done.length) await imported(done);
    } catch (error) {
      alerts.show(t("Import stopped: {error}", { error: errorText(error) }));
    } finally {
      status.remove();
    }
  }

  // Each refused file with its reason (a taken name offers Replace); past a handful, the rest
  // in one alert, so a folder with many bad files does not bury the screen.
  const SHOWN_FAILURES = 5;
  function reportFailures(failed) {
    for (const { file, error } of failed.slice(0, SHOWN_FAILURES)) reportImportError(file, error);
    const rest = failed.slice(SHOWN_FAILURES);
    if (rest.length) {
      const names = rest.map(({ file }) => file.webkitRelativePath || file.name);
      alerts.show(t("{count} more files could not be imported: {names}", { count: rest.length, names: names.join(", ") }));
    }
  }

  function reportImportError(file, error) {
    const taken = error.type === "NameTaken";
    const name = file.webkitRelativePath || file.name;
    const replace = async () => {
      try {
        const { imported: done, failed } = await importEach([file], { replace: true });
        reportFailures(failed);
        if (done.length) await imported(done);
      } catch (again) {
        alerts.show(`${name}: ${errorText(again)}`);
      }
    };
    alerts.show(
      taken
        ? t("{message}. Replace it with the file's?", { message: error.message })
        : error.message.includes(name) // the server's message names the file already
          ? error.message
          : `${name}: ${error.message}`,
      taken ? { actions: [{ label: t("Replace"), run: replace }] } : {},
    );
  }

  async function imported(results) {
    const verbs = { imported: t("Imported"), replaced: t("Replaced"), unchanged: t("Already there:"), kept: t("Kept"), linked: t("Linked to its character:") };
    const names = new Map(); // status -> names, in the order met
    for (const r of results) names.set(r.status, [...(names.get(r.status) || []), r.name]);
    // a folder's hundreds of names would fill the screen: the first few, then how many more
    const some = (list) =>
      list.length > 6 ? t("{names} and {count} more", { names: list.slice(0, 5).join(", "), count: list.length - 5 }) : list.join(", ");
    const lines = [...names].map(([status, list]) => `${verbs[status] || status} ${some(list)}`);
    toast(lines.join("; "), "info");
    await load({ tags: true });
  }

  let searchTimer;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      offset = 0;
      load().catch(reportError);
    }, 200);
  });
  for (const control of [sort, favOnly]) {
    control.addEventListener("change", () => {
      localStorage.setItem(SORT_KEY, sort.value);
      offset = 0;
      load().catch(reportError);
    });
  }
  picker.addEventListener("change", () => importFiles([...picker.files]));
  folderPicker.addEventListener("change", () => importFiles([...folderPicker.files]));
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
    droppedFiles(event.dataTransfer).then(importFiles).catch(reportError);
  });

  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, t("Characters")),
      search,
      h("label", { class: "inline" }, t("Sort "), sort),
      h("label", { class: "inline check" }, favOnly, t("Favourites only")),
      button(t("New character"), () => {
        window.location.hash = "#/character/new";
      }),
    ),
    chips,
    drop,
    alerts.node,
    picker,
    folderPicker,
    grid,
    pager,
  );
  await load({ tags: true });
}

// An empty library's second question: which model will reply. A SillyTavern user comes with
// an API of their own; the hint names what replies now and where a profile for it is added.
async function connectionHint() {
  const where = h("a", { href: "#/settings" }, t("add a connection profile in Settings"));
  let now = "";
  try {
    const selections = await api("GET", "/settings/selections");
    now = selections.profile
      ? t("Replies come from the connection profile {name}.", { name: selections.profile })
      : t("Replies come from the built-in local model ({model}).", { model: selections.embedded.model });
  } catch {
    now = ""; // the hint is a help, not the screen: without it the way to Settings still shows
  }
  return h(
    "li",
    { class: "empty connection-hint" },
    now ? `${now} ` : "",
    t("To chat through your own model or API (OpenAI, Claude, KoboldCpp and others), "),
    where,
    t("."),
  );
}

function starLook(star, character) {
  star.textContent = character.fav ? "★" : "☆";
  star.setAttribute("aria-pressed", String(Boolean(character.fav)));
  star.classList.toggle("on", Boolean(character.fav));
}

function tile(character, toggleFav) {
  // A card without an image (a JSON import: no thumbnail URL) shows its initial, asking for
  // nothing; one whose image fails to load shows it too.
  const initial = () => h("span", { class: "initial", "aria-hidden": "true" }, character.name.slice(0, 1));
  let image = initial();
  if (character.thumbnail_url) {
    image = h("img", { src: character.thumbnail_url, alt: "", loading: "lazy", width: 100, height: 150 });
    image.addEventListener("error", () => image.replaceWith(initial()));
  }
  const open = button(
    [image, h("span", { class: "name" }, character.name)],
    () => openLatestChat(character).catch(reportError),
    { class: "tile", "aria-label": t("Chat with {name}", { name: character.name }) },
  );
  const star = button("", () => toggleFav(character, star), {
    class: "star",
    "aria-label": t("Favourite {name}", { name: character.name }),
  });
  starLook(star, character);
  const edit = h(
    "a",
    { class: "edit", href: `#/character/${encodeURIComponent(character.id)}` },
    t("Edit"),
    h("span", { class: "visually-hidden" }, ` ${character.name}`),
  );
  return h("li", { class: "tile-box" }, open, h("div", { class: "tile-actions" }, star, edit));
}

async function openLatestChat(character) {
  const chats = await api("GET", `/chats?${new URLSearchParams({ character: character.id, limit: 1 })}`);
  const chat = chats.items[0] || (await createChat({ character: character.id }));
  window.location.hash = `#/chat/${encodeURIComponent(chat.id)}`;
}
