// What the settings sections share: one labelled control per setting, built from a spec
// ({key, label, kind, choices, step}), that reads back the value in the type it was given
// (a number stays a number, a blank number is null for the server to refuse by name).
// The control is named by its visible label alone (aria-label: a <select> inside a <label>
// would otherwise take its chosen option's text into its name).

import { h } from "../dom.js";
import { t } from "../i18n.js";

let lists = 0;

// kind: "number" | "checkbox" | "text" | "textarea" | "select" (choices: [value, text]);
// `suggestions`: names a text field offers (it still takes any)
export function settingField(spec, value) {
  const { label, kind = typeof value === "boolean" ? "checkbox" : typeof value === "number" ? "number" : "text" } = spec;
  let input;
  if (kind === "checkbox") {
    input = h("input", { type: "checkbox", checked: Boolean(value) });
  } else if (kind === "select") {
    const choices = [...spec.choices];
    if (!choices.some(([v]) => String(v) === String(value))) choices.push([value, `${value}`]);
    input = h("select", {}, choices.map(([v, text]) => h("option", { value: String(v), selected: String(v) === String(value) }, text)));
  } else if (kind === "textarea") {
    input = h("textarea", { rows: spec.rows || 3 });
    input.value = value ?? "";
  } else {
    input = h("input", { type: kind, value: value ?? "", step: kind === "number" ? spec.step || "1" : undefined });
  }
  input.setAttribute("aria-label", label);
  if (spec.key) input.dataset.key = spec.key;
  let suggestions = null;
  if (spec.suggestions) {
    lists += 1;
    suggestions = h("datalist", { id: `setting-list-${lists}` }, spec.suggestions.map((name) => h("option", { value: name })));
    input.setAttribute("list", suggestions.id);
  }
  const node =
    kind === "checkbox"
      ? h("label", { class: "field check" }, input, label)
      : h("label", { class: kind === "textarea" ? "field wide" : "field" }, label, input, suggestions);
  const read = () => {
    if (kind === "checkbox") return input.checked;
    if (kind === "number") return input.value === "" ? null : Number(input.value);
    if (kind === "select") return typeof value === "number" ? Number(input.value) : input.value;
    return input.value;
  };
  return { node, input, read, changed: () => read() !== value };
}

// The fields of `specs` for the values of `current`; `changes()` maps each changed key to its
// new value.
export function settingGroup(specs, current) {
  const fields = specs.map((spec) => ({ spec, ...settingField(spec, current[spec.key]) }));
  return {
    nodes: fields.map((f) => f.node),
    changes() {
      const out = {};
      for (const f of fields) if (f.changed()) out[f.spec.key] = f.read();
      return out;
    },
  };
}

// A fieldset of `nodes` under a legend.
export function fieldset(title, nodes, attrs = {}) {
  return h("fieldset", { class: "fields", ...attrs }, h("legend", {}, title), ...nodes);
}
