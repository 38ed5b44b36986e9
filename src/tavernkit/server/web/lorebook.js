// Lorebooks: the list (#/lorebooks) and the editor of one (#/lorebook/<id>): each entry's
// keys, secondary keys and their logic, position and depth, order, probability, inclusion
// group, timed effects (sticky, cooldown, delay), constant / disabled; "test this text" scans a
// text with the book as saved and shows what fires and why.

import { api } from "./api.js";
import { reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";

const LOGIC = [
  [0, "AND ANY"],
  [3, "AND ALL"],
  [2, "NOT ANY"],
  [1, "NOT ALL"],
];
const POSITIONS = [
  [0, "before character"],
  [1, "after character"],
  [5, "before examples"],
  [6, "after examples"],
  [2, "author's note top"],
  [3, "author's note bottom"],
  [4, "in chat at depth"],
  [7, "outlet"],
];

export async function showLorebooks(view) {
  const page = await api("GET", "/lorebooks?limit=500");
  const name = h("input", { "aria-label": "New lorebook name", placeholder: "New lorebook name" });
  const create = button("Create", async () => {
    try {
      const made = await api("POST", "/lorebooks", { name: name.value.trim(), entries: {} });
      window.location.hash = `#/lorebook/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });
  view.append(
    h("div", { class: "toolbar" }, h("h1", {}, "Lorebooks"), name, create),
    h(
      "ul",
      { class: "chat-list", "aria-label": "Lorebooks" },
      page.items.map((b) => h("li", {}, h("a", { href: `#/lorebook/${encodeURIComponent(b.id)}` }, b.name))),
    ),
  );
}

function field(label, input) {
  return h("label", { class: "field" }, label, input);
}

function numberInput(label, value, attrs = {}) {
  return h("input", { type: "number", value: value ?? "", "aria-label": label, ...attrs });
}

function select(label, options, value) {
  const node = h("select", { "aria-label": label }, options.map(([v, text]) => h("option", { value: v }, text)));
  node.value = String(value ?? options[0][0]);
  return node;
}

function splitKeys(text) {
  return text
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
}

// One entry's form; read() gives the entry back with the edits (unknown fields kept).
function entryForm(entry) {
  const title = entry.comment || (entry.key || []).join(", ") || `entry ${entry.uid}`;
  const inputs = {
    comment: h("input", { value: entry.comment || "", "aria-label": "Title" }),
    key: h("input", { value: (entry.key || []).join(", "), "aria-label": "Keys" }),
    keysecondary: h("input", { value: (entry.keysecondary || []).join(", "), "aria-label": "Secondary keys" }),
    selectiveLogic: select("Logic", LOGIC, entry.selectiveLogic ?? 0),
    position: select("Position", POSITIONS, entry.position ?? 0),
    depth: numberInput("Depth", entry.depth ?? 4, { min: 0 }),
    order: numberInput("Order", entry.order ?? 100),
    probability: numberInput("Probability", entry.probability ?? 100, { min: 0, max: 100 }),
    group: h("input", { value: entry.group || "", "aria-label": "Inclusion group" }),
    sticky: numberInput("Sticky", entry.sticky ?? 0, { min: 0 }),
    cooldown: numberInput("Cooldown", entry.cooldown ?? 0, { min: 0 }),
    delay: numberInput("Delay", entry.delay ?? 0, { min: 0 }),
    constant: h("input", { type: "checkbox", "aria-label": "Constant", checked: Boolean(entry.constant) }),
    disable: h("input", { type: "checkbox", "aria-label": "Disabled", checked: Boolean(entry.disable) }),
    content: h("textarea", { rows: 4, "aria-label": "Content" }),
  };
  inputs.content.value = entry.content || "";
  const node = h(
    "details",
    { class: "entry card", dataset: { uid: entry.uid } },
    h("summary", {}, title),
    h(
      "div",
      { class: "fields" },
      field("Title", inputs.comment),
      field("Keys (comma separated)", inputs.key),
      field("Secondary keys", inputs.keysecondary),
      field("Logic", inputs.selectiveLogic),
      field("Position", inputs.position),
      field("Depth", inputs.depth),
      field("Order", inputs.order),
      field("Probability %", inputs.probability),
      field("Inclusion group", inputs.group),
      field("Sticky", inputs.sticky),
      field("Cooldown", inputs.cooldown),
      field("Delay", inputs.delay),
      field("Constant", inputs.constant),
      field("Disabled", inputs.disable),
    ),
    field("Content", inputs.content),
  );
  const num = (input) => (input.value === "" ? 0 : Number(input.value));
  return {
    node,
    read() {
      const secondary = splitKeys(inputs.keysecondary.value);
      return {
        ...entry,
        comment: inputs.comment.value,
        key: splitKeys(inputs.key.value),
        keysecondary: secondary,
        selective: secondary.length > 0,
        selectiveLogic: Number(inputs.selectiveLogic.value),
        position: Number(inputs.position.value),
        depth: num(inputs.depth),
        order: num(inputs.order),
        probability: num(inputs.probability),
        useProbability: num(inputs.probability) < 100 || Boolean(entry.useProbability),
        group: inputs.group.value,
        sticky: num(inputs.sticky),
        cooldown: num(inputs.cooldown),
        delay: num(inputs.delay),
        constant: inputs.constant.checked,
        disable: inputs.disable.checked,
        content: inputs.content.value,
      };
    },
  };
}

export async function showLorebook(view, ref) {
  const record = await api("GET", `/lorebooks/${encodeURIComponent(ref)}`);
  const data = record.data;
  const entries = Array.isArray(data.entries) ? data.entries : Object.values(data.entries || {});
  const forms = entries.map(entryForm);
  const list = h("div", { class: "entries" }, forms.map((f) => f.node));

  const add = button("Add entry", () => {
    const uid = Math.max(-1, ...forms.map((f) => Number(f.read().uid) || 0)) + 1;
    const form = entryForm({ uid, key: [], content: "", order: 100, probability: 100, position: 0 });
    forms.push(form);
    list.append(form.node);
    form.node.open = true;
    form.node.querySelector("input").focus();
  });
  const save = button(
    "Save lorebook",
    async () => {
      const edited = forms.map((f) => f.read());
      const body = { name: record.name, ...data, entries: Object.fromEntries(edited.map((e) => [String(e.uid), e])) };
      try {
        await api("PUT", `/lorebooks/${encodeURIComponent(record.id)}`, body);
        toast("Lorebook saved", "info");
      } catch (error) {
        reportError(error);
      }
    },
    { class: "primary" },
  );

  const sample = h("textarea", { rows: 3, "aria-label": "Text to test" });
  const results = h("table", { class: "lore-test" });
  const test = button("Test this text", async () => {
    try {
      const rows = await api("POST", `/ui/lorebooks/${encodeURIComponent(record.id)}/test`, {
        text: sample.value,
        seed: 1,
      });
      results.replaceChildren(
        h("thead", {}, h("tr", {}, ["Entry", "Fires", "Why", "Position", "Tokens"].map((t) => h("th", {}, t)))),
        h(
          "tbody",
          {},
          rows.map((r) =>
            h(
              "tr",
              { class: r.fired ? "fired" : "", dataset: { uid: r.uid } },
              h("td", {}, r.comment || r.key || String(r.uid)),
              h("td", {}, r.fired ? "yes" : "no"),
              h("td", {}, r.why || ""),
              h("td", {}, r.position_label || ""),
              h("td", { class: "num" }, String(r.tokens)),
            ),
          ),
        ),
      );
    } catch (error) {
      reportError(error);
    }
  });

  view.append(
    h("div", { class: "toolbar" }, h("h1", {}, record.name), h("a", { href: "#/lorebooks" }, "All lorebooks"), add, save),
    list,
    h("section", { class: "card", "aria-label": "Test this text" }, h("h2", {}, "Test this text"), sample, test, results),
  );
}
