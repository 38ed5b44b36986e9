// A lorebook's entries: search (everywhere, or only the keys, the title or the content),
// show only enabled, disabled, constant or secondary-keyed ones, sort, add, duplicate, delete,
// enable, and an editor per entry built only when its row is opened. The screen starts from
// the entries' lines (title, keys, switches and numbers: GET /lorebooks/{id}/entries, no
// content); an entry is read whole when its row opens, and a search of the content asks the
// server which entries hold the text. Rows are shown a page at a time, so a 20,000-entry book
// opens with a few dozen rows and no forms. "Save lorebook"
// sends each changed entry's changed fields (PATCH /lorebooks/{id}/entries/{uid}); adding
// (the server picks the uid), duplicating, deleting and enabling are stored at once. The book
// is never sent back whole.

import { api, isStale } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { entryForm, entryRow, entryTitle } from "./entry.js";
import { t } from "../i18n.js";

const PAGE = 50;

const num = (value, fallback) => (typeof value === "number" ? value : Number(value ?? fallback) || fallback);
const byUid = (a, b) => num(a.uid, 0) - num(b.uid, 0);
const byTitle = (a, b) => entryTitle(a).localeCompare(entryTitle(b), undefined, { sensitivity: "base" });
export const SORTS = [
  ["display", t("Display order"), (a, b) => num(a.displayIndex, num(a.uid, 0)) - num(b.displayIndex, num(b.uid, 0)) || byUid(a, b)],
  ["title", t("Title A–Z"), byTitle],
  ["title-desc", t("Title Z–A"), (a, b) => byTitle(b, a)],
  ["order-desc", t("Order, highest first"), (a, b) => num(b.order, 100) - num(a.order, 100) || byUid(a, b)],
  ["order", t("Order, lowest first"), (a, b) => num(a.order, 100) - num(b.order, 100) || byUid(a, b)],
  ["uid", t("UID, lowest first"), byUid],
  ["uid-desc", t("UID, highest first"), (a, b) => byUid(b, a)],
  ["depth", t("Depth, lowest first"), (a, b) => num(a.depth, 4) - num(b.depth, 4) || byUid(a, b)],
  ["depth-desc", t("Depth, highest first"), (a, b) => num(b.depth, 4) - num(a.depth, 4) || byUid(a, b)],
  ["probability", t("Probability, lowest first"), (a, b) => num(a.probability, 100) - num(b.probability, 100) || byUid(a, b)],
];

// What a search looks in: every field, or only the keys (primary and secondary), the title or
// the content.
export const SEARCH_IN = [
  ["all", t("Everything"), (e) => [e.comment || "", ...(e.key || []), ...(e.keysecondary || []), e.content || ""]],
  ["keys", t("Keys"), (e) => [...(e.key || []), ...(e.keysecondary || [])]],
  ["title", t("Title"), (e) => [e.comment || ""]],
  ["content", t("Content"), (e) => [e.content || ""]],
];

// Which entries are shown, whatever the search: all, only enabled or disabled ones, only
// constant ones (always inserted), only those with secondary keys.
export const SHOW = [
  ["all", t("All entries"), () => true],
  ["enabled", t("Enabled"), (e) => !e.disable],
  ["disabled", t("Disabled"), (e) => Boolean(e.disable)],
  ["constant", t("Constant"), (e) => Boolean(e.constant)],
  ["secondary", t("With secondary keys"), (e) => (e.keysecondary || []).length > 0],
];

function haystack(entry, where) {
  return SEARCH_IN.find(([value]) => value === where)[2](entry).join("\n").toLowerCase();
}

// The entries of the lines route ({fields, entries: [[value per field..., uid]]}) as objects
// with SillyTavern's names.
function fromLines({ fields, entries }) {
  return entries.map((line) => Object.fromEntries(fields.map((name, i) => [name, line[i]])));
}

// `book`: the record's line (id, name); `lines`: GET /lorebooks/{id}/entries's answer;
// `alerts`: the screen's persistent errors; `onDirty(count)`: the number of entries with
// unsaved edits, after each edit and save.
export function createEntries(book, lines, alerts, onDirty) {
  const base = `/lorebooks/${encodeURIComponent(book.id)}/entries`;
  // uid -> the entry: its line until it is read whole (its row opened, or changed here)
  const entries = new Map(fromLines(lines).map((e) => [String(e.uid), e]));
  const whole = new Set(); // uids whose entry in `entries` is whole (has its content)
  const texts = new Map(); // "<where> <uid>" -> lower-cased searchable text (made on first search)
  const forms = new Map(); // uid -> form, for the entries opened at least once
  // uid -> the entry's revision as last read whole (with its form), sent as If-Match on save
  const revisions = new Map();
  // the uids whose content holds `query`, as the server found them (for entries not read whole)
  let contentHits = new Set();
  let searches = 0; // the latest search asked of the server: an older answer is dropped
  const open = new Set();
  let pinned = []; // uids just added or duplicated: shown first until the search or sort changes
  let query = "";
  let where = "all";
  let show = "all";
  let sort = "display";
  let shown = PAGE;

  const search = h("input", { type: "search", placeholder: t("keys, title or content") });
  const sortBy = h("select", {}, SORTS.map(([value, label]) => h("option", { value }, label)));
  const searchIn = h("select", {}, SEARCH_IN.map(([value, label]) => h("option", { value }, label)));
  const showOnly = h("select", {}, SHOW.map(([value, label]) => h("option", { value }, label)));
  const count = h("p", { class: "muted entry-count", role: "status" });
  const list = h("ul", { class: "entry-list", "aria-label": t("Entries") });
  const more = h("div", { class: "more" });

  // the search box applies what was typed 120 ms after the last key; an action meanwhile (Add
  // entry) applies it first, so the late redraw never undoes what the action shows. A search
  // of the content waits for the server's answer (`searching`); true when it is the latest.
  let timer = null;
  let searching = Promise.resolve(true);
  function applySearch() {
    clearTimeout(timer);
    timer = null;
    query = search.value.trim().toLowerCase();
    pinned = [];
    shown = PAGE;
    searching = findContent(query, where);
    return searching;
  }
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (await applySearch()) render();
    }, 120);
  });
  showOnly.addEventListener("change", () => {
    show = showOnly.value;
    pinned = [];
    shown = PAGE;
    render();
  });
  searchIn.addEventListener("change", async () => {
    where = searchIn.value;
    pinned = [];
    shown = PAGE;
    if (await applySearch()) render();
  });
  sortBy.addEventListener("change", () => {
    sort = sortBy.value;
    pinned = [];
    shown = PAGE;
    render();
  });

  // Which entries' content holds `text` (the server reads the content; the lines have none).
  // False when a later search was asked meanwhile (its answer is the one shown).
  async function findContent(text, inWhere) {
    const mine = ++searches;
    let hits = new Set();
    if (text && (inWhere === "all" || inWhere === "content")) {
      try {
        const found = await api("GET", `${base}?content=${encodeURIComponent(text)}`);
        hits = new Set(fromLines(found).map((e) => String(e.uid)));
      } catch (error) {
        if (mine === searches) alerts.show(errorText(error), { retry: () => applySearch().then((latest) => latest && render()) });
      }
    }
    if (mine !== searches) return false;
    contentHits = hits;
    return true;
  }

  // Whether the entry matches the search: what its line holds is matched here; its content
  // here when it was read whole (an edit shows at once), else by the server's answer.
  function matchesQuery(e) {
    const uid = String(e.uid);
    const key = `${where} ${uid}`;
    if (!texts.has(key)) texts.set(key, haystack(e, where));
    if (texts.get(key).includes(query)) return true;
    return !whole.has(uid) && (where === "all" || where === "content") && contentHits.has(uid);
  }

  function matching() {
    let found = [...entries.values()];
    if (show !== "all") found = found.filter(SHOW.find(([value]) => value === show)[2]);
    if (query) found = found.filter(matchesQuery);
    const compare = SORTS.find(([value]) => value === sort)[2];
    found.sort(compare);
    if (pinned.length) {
      const first = pinned.map((uid) => entries.get(uid)).filter(Boolean);
      found = [...first, ...found.filter((e) => !pinned.includes(String(e.uid)))];
    }
    return found;
  }

  function dirtyCount() {
    let n = 0;
    for (const form of forms.values()) if (form.dirty()) n += 1;
    return n;
  }

  function changed() {
    onDirty(dirtyCount());
  }

  function rowNode(uid) {
    return list.querySelector(`li.entry[data-uid="${CSS.escape(uid)}"]`);
  }

  function formOf(entry) {
    const uid = String(entry.uid);
    if (!forms.has(uid)) {
      const form = entryForm(entry, () => {
        const row = rowNode(uid);
        if (row) row.classList.toggle("dirty", form.dirty());
        changed();
      });
      forms.set(uid, form);
    }
    return forms.get(uid);
  }

  // Read the entry whole (its content, every field, its revision), once, before its form is
  // built: the form shows the entry as it is now, and its save is refused as stale if another
  // tab changes the entry meanwhile (nothing overwritten). True when it was read.
  async function readWhole(uid) {
    if (whole.has(uid)) return true;
    try {
      const now = await api("GET", `${base}/${encodeURIComponent(uid)}`);
      revisions.set(uid, now.revision);
      stored(now.data);
      return true;
    } catch (error) {
      alerts.show(t("Entry {uid}: {value}", { uid, value: errorText(error) }), { retry: () => toggle(uid) });
      return false;
    }
  }

  // Read the entry again after a refused save: its form is rebuilt from it (the edits go).
  async function reloadEntry(uid) {
    try {
      const now = await api("GET", `${base}/${encodeURIComponent(uid)}`);
      revisions.set(uid, now.revision);
      forms.delete(uid);
      stored(now.data);
      replaceRow(uid);
      changed();
    } catch (error) {
      alerts.show(t("Entry {uid}: {value}", { uid, value: errorText(error) }), { retry: () => reloadEntry(uid) });
    }
  }

  function rowOf(entry) {
    const uid = String(entry.uid);
    const isOpen = open.has(uid);
    const form = forms.get(uid);
    const row = entryRow(entry, {
      open: isOpen,
      dirty: Boolean(form && form.dirty()),
      on: { toggle: () => toggle(uid), enable: (on) => enable(uid, on) },
    });
    if (isOpen) {
      const editor = formOf(entry);
      row.append(
        h(
          "div",
          { class: "entry-body" },
          editor.node,
          h(
            "div",
            { class: "row" },
            button(t("Duplicate entry"), () => duplicate(uid)),
            button(t("Delete entry"), () => remove(uid), { class: "danger" }),
          ),
        ),
      );
    }
    return row;
  }

  function render() {
    const found = matching();
    const page = found.slice(0, Math.max(shown, pinned.length));
    list.replaceChildren(...page.map(rowOf));
    const total = entries.size;
    count.textContent = query || show !== "all"
      ? t("{count} of {total} entries match", { count: found.length, total })
      : total === 1 ? t("1 entry") : t("{total} entries", { total });
    const left = found.length - page.length;
    more.replaceChildren(
      left > 0
        ? button(t("Show {value} more ({left} not shown)", { value: Math.min(left, PAGE), left }), () => {
            shown += PAGE;
            render();
          })
        : "",
    );
  }

  function replaceRow(uid) {
    const old = rowNode(uid);
    const entry = entries.get(uid);
    if (old && entry) old.replaceWith(rowOf(entry));
  }

  async function toggle(uid) {
    if (open.has(uid)) open.delete(uid);
    else if (await readWhole(uid)) open.add(uid);
    else return;
    replaceRow(uid);
    const row = rowNode(uid);
    if (row) row.querySelector(".entry-toggle").focus();
  }

  // `entry` (whole: from the server) is the stored one now.
  function stored(entry) {
    const uid = String(entry.uid);
    entries.set(uid, entry);
    whole.add(uid);
    for (const [value] of SEARCH_IN) texts.delete(`${value} ${uid}`);
    const form = forms.get(uid);
    if (form) form.rebase(entry);
  }

  async function enable(uid, on) {
    try {
      const done = await api("PATCH", `${base}/${encodeURIComponent(uid)}`, { disable: !on });
      stored(done.data);
      revisions.set(uid, done.revision);
    } catch (error) {
      alerts.show(t("Entry {uid}: {value}", { uid, value: errorText(error) }), { retry: () => enable(uid, on) });
    }
    replaceRow(uid);
    const row = rowNode(uid);
    if (row) row.querySelector(".entry-head input").focus();
  }

  async function addFrom(fields, note) {
    try {
      const made = await api("POST", base, fields);
      revisions.set(String(made.uid), made.revision);
      stored(made.data);
      if (timer !== null) applySearch();
      await searching;
      pinned = [made.uid, ...pinned];
      open.add(made.uid);
      render();
      formOf(made.data).focus();
      toast(note, "info");
    } catch (error) {
      alerts.show(errorText(error), { retry: () => addFrom(fields, note) });
    }
  }

  function add() {
    return addFrom({}, t("Entry added"));
  }

  async function duplicate(uid) {
    if (!(await readWhole(uid))) return;
    const entry = entries.get(uid);
    const form = forms.get(uid);
    const copy = { ...entry, ...(form ? form.changes() : {}) };
    delete copy.uid;
    delete copy.displayIndex;
    return addFrom(copy, t("Entry duplicated"));
  }

  async function remove(uid) {
    const entry = entries.get(uid);
    if (!window.confirm(t("Delete the entry “{value}”?", { value: entryTitle(entry) }))) return;
    try {
      await api("DELETE", `${base}/${encodeURIComponent(uid)}`);
      entries.delete(uid);
      whole.delete(uid);
      forms.delete(uid);
      open.delete(uid);
      pinned = pinned.filter((u) => u !== uid);
      render();
      changed();
      toast(t("Entry deleted"), "info");
    } catch (error) {
      alerts.show(errorText(error), { retry: () => remove(uid) });
    }
  }

  // Send every changed entry's changed fields, one entry at a time. An entry the server
  // refuses stays unsaved, with an alert naming it and the field.
  async function save() {
    const pending = [...forms.entries()].filter(([, form]) => form.dirty());
    if (!pending.length) {
      toast(t("No changes to save"), "info");
      return true;
    }
    let failed = 0;
    for (const [uid, form] of pending) {
      try {
        const url = `${base}/${encodeURIComponent(uid)}`;
        const done = await api("PATCH", url, form.changes(), { ifMatch: revisions.get(uid) });
        revisions.set(uid, done.revision);
        stored(done.data);
      } catch (error) {
        failed += 1;
        const title = entryTitle(entries.get(uid));
        if (isStale(error)) {
          alerts.show(
            t("Entry “{title}” was changed in another tab or device, so your edit was not saved. Reload it to see the current entry (copy your text first to keep it).", { title }),
            { actions: [{ label: t("Reload entry"), run: () => reloadEntry(uid) }] },
          );
        } else {
          const where = error.body && error.body.field ? ` (${error.body.field})` : "";
          alerts.show(t("Entry “{title}”{where}: {value}", { title, where, value: errorText(error) }), { retry: save });
        }
      }
      replaceRow(uid);
    }
    changed();
    if (!failed) toast(t("Lorebook saved"), "info");
    return failed === 0;
  }

  render();
  const node = h(
    "section",
    { class: "entries-panel" },
    h(
      "div",
      { class: "entry-tools" },
      h("label", { class: "field grow" }, t("Search entries"), search),
      h("label", { class: "field" }, t("Search in"), searchIn),
      h("label", { class: "field" }, t("Show"), showOnly),
      h("label", { class: "field" }, t("Sort by"), sortBy),
      button(t("Add entry"), add),
    ),
    count,
    list,
    more,
  );
  return { node, save, dirtyCount };
}
