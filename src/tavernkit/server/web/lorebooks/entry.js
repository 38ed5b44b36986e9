// One lorebook entry: its row (title, keys, Enabled) and, only once the row is opened, its
// form: keys, secondary keys and their logic, position, depth and role, order, probability,
// inclusion group, timed effects (sticky, cooldown, delay), constant, content. The form knows
// which fields the user touched, so saving sends only those that changed.

import { button, h } from "../dom.js";
import { t } from "../i18n.js";

export const LOGIC = [
  [0, t("AND ANY")],
  [3, t("AND ALL")],
  [2, t("NOT ANY")],
  [1, t("NOT ALL")],
];
export const POSITIONS = [
  [0, t("before character")],
  [1, t("after character")],
  [5, t("before examples")],
  [6, t("after examples")],
  [2, t("author's note top")],
  [3, t("author's note bottom")],
  [4, t("in chat at depth")],
  [7, "outlet"],
];
const ROLES = [
  [0, "system"],
  [1, "user"],
  [2, "assistant"],
];

export function entryTitle(entry) {
  return entry.comment || (entry.key || []).join(", ") || t("Entry {uid}", { uid: entry.uid });
}

function field(label, input, cls = "field") {
  return h("label", { class: cls }, label, input);
}

function select(options, value) {
  const node = h("select", {}, options.map(([v, text]) => h("option", { value: v }, text)));
  const wanted = String(value ?? options[0][0]);
  if (!options.some(([v]) => String(v) === wanted)) node.append(h("option", { value: wanted }, wanted));
  node.value = wanted;
  return node;
}

function numberInput(value, attrs = {}) {
  return h("input", { type: "number", value: value ?? "", ...attrs });
}

function splitKeys(text) {
  return text
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
}

const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

// The form of `entry`. `changed()` runs on every edit. `changes()` gives the fields the user
// touched whose value differs from the entry's (JSON names, ready for PATCH); `rebase(entry)`
// takes a newer stored entry as what the edits are compared with.
export function entryForm(entry, changed) {
  let base = entry;
  const inputs = {
    comment: h("input", { value: entry.comment || "" }),
    key: h("input", { value: (entry.key || []).join(", "), placeholder: t("comma separated") }),
    keysecondary: h("input", { value: (entry.keysecondary || []).join(", "), placeholder: t("comma separated") }),
    selectiveLogic: select(LOGIC, entry.selectiveLogic ?? 0),
    position: select(POSITIONS, entry.position ?? 0),
    depth: numberInput(entry.depth ?? 4, { min: 0 }),
    role: select(ROLES, entry.role ?? 0),
    order: numberInput(entry.order ?? 100),
    probability: numberInput(entry.probability ?? 100, { min: 0, max: 100 }),
    group: h("input", { value: entry.group || "" }),
    sticky: numberInput(entry.sticky, { min: 0 }),
    cooldown: numberInput(entry.cooldown, { min: 0 }),
    delay: numberInput(entry.delay, { min: 0 }),
    constant: h("input", { type: "checkbox", checked: Boolean(entry.constant) }),
    content: h("textarea", { rows: 6 }),
  };
  inputs.content.value = entry.content || "";
  const touched = new Set();
  for (const [name, input] of Object.entries(inputs)) {
    const mark = () => {
      touched.add(name);
      changed();
    };
    input.addEventListener("input", mark);
    input.addEventListener("change", mark);
  }

  const number = (input, empty) => (input.value === "" ? empty : Number(input.value));
  const readers = {
    comment: () => inputs.comment.value,
    key: () => splitKeys(inputs.key.value),
    keysecondary: () => splitKeys(inputs.keysecondary.value),
    selectiveLogic: () => Number(inputs.selectiveLogic.value),
    position: () => Number(inputs.position.value),
    depth: () => number(inputs.depth, null),
    role: () => Number(inputs.role.value),
    order: () => number(inputs.order, 100),
    probability: () => number(inputs.probability, null),
    group: () => inputs.group.value,
    sticky: () => number(inputs.sticky, null),
    cooldown: () => number(inputs.cooldown, null),
    delay: () => number(inputs.delay, null),
    constant: () => inputs.constant.checked,
    content: () => inputs.content.value,
  };

  function changes() {
    const out = {};
    for (const name of touched) {
      const value = readers[name]();
      if (!same(value, base[name])) out[name] = value;
    }
    // Secondary keys count only in a selective entry; a probability only when it is used.
    if (out.keysecondary && out.keysecondary.length && !base.selective) out.selective = true;
    if ("probability" in out && out.probability !== null && out.probability < 100 && !base.useProbability) {
      out.useProbability = true;
    }
    return out;
  }

  const node = h(
    "div",
    { class: "entry-form" },
    h(
      "div",
      { class: "fields" },
      field(t("Title"), inputs.comment),
      field(t("Keys"), inputs.key),
      field(t("Secondary keys"), inputs.keysecondary),
      field(t("Logic"), inputs.selectiveLogic),
      field(t("Position"), inputs.position),
      field(t("Depth"), inputs.depth),
      field(t("Role"), inputs.role),
      field(t("Order"), inputs.order),
      field(t("Probability"), inputs.probability),
      field(t("Inclusion group"), inputs.group),
      field(t("Sticky"), inputs.sticky),
      field(t("Cooldown"), inputs.cooldown),
      field(t("Delay"), inputs.delay),
      field(t("Constant"), inputs.constant, "field check"),
    ),
    field(t("Content"), inputs.content),
  );
  return {
    node,
    changes,
    dirty: () => Object.keys(changes()).length > 0,
    rebase(entry) {
      base = entry;
    },
    focus() {
      inputs.comment.focus();
    },
  };
}

// The entry's row: a button with its title that opens and closes the form, its keys, and the
// Enabled switch; "unsaved" shows while the row has the class "dirty". `on`: {toggle(),
// enable(checked)}.
export function entryRow(entry, { open, dirty, on }) {
  const enabled = h("input", { type: "checkbox", checked: !entry.disable });
  enabled.addEventListener("change", () => on.enable(enabled.checked));
  const title = button(entryTitle(entry), on.toggle, { class: "entry-toggle", "aria-expanded": String(open) });
  const keys = entry.comment && (entry.key || []).length ? (entry.key || []).join(", ") : "";
  const flags = [
    entry.constant ? h("span", { class: "flag" }, t("constant")) : null,
    h("span", { class: "flag unsaved" }, t("unsaved")),
    h("span", { class: "uid muted" }, `#${entry.uid}`),
  ];
  const cls = ["entry", entry.disable && "disabled", open && "open", dirty && "dirty"].filter(Boolean);
  return h(
    "li",
    { class: cls.join(" "), dataset: { uid: entry.uid } },
    h(
      "div",
      { class: "entry-head" },
      title,
      keys ? h("span", { class: "entry-keys muted" }, keys) : null,
      h("span", { class: "entry-flags" }, flags),
      h("label", { class: "field check" }, enabled, t("Enabled")),
    ),
  );
}
