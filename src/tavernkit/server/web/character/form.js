// The card's fields as a form: every V2 field, SillyTavern's extensions (talkativeness, the
// character's note at a depth), the V3 additions (nickname, group-only greetings, sources).
// `read(card)` gives the card back with the edits: a copy of the JSON as it was read, with only
// the fields shown here changed (a field left as it was keeps its stored spelling: null, a
// number version...), so nothing the form does not show is ever dropped. `check()` names a bad
// value before anything is sent; `showError(field, message)` puts the server's word next to
// the field it names (its JSON path, e.g. data.extensions.depth_prompt.depth).

import { h } from "../dom.js";
import { createGreetings } from "./greetings.js";
import { t } from "../i18n.js";

const ROLES = ["system", "user", "assistant"];
const DEFAULT_TALKATIVENESS = 0.5;

let uniqueId = 0;

function textInput(value, attrs = {}) {
  return h("input", { type: "text", value: value ?? "", ...attrs });
}

function textArea(value, rows) {
  const area = h("textarea", { rows });
  area.value = value ?? "";
  return area;
}

// A control under its visible label (a <label for>: the label alone names it) and a hint
// that describes it.
function field(label, control, hint) {
  const id = control.id || (control.id = `card-field-${++uniqueId}`);
  const node = h("div", { class: "field" }, h("label", { for: id, class: "label" }, label), control);
  if (hint) {
    node.append(h("span", { class: "hint muted", id: `${id}-hint` }, hint));
    control.setAttribute("aria-describedby", `${id}-hint`);
    control.dataset.hint = `${id}-hint`;
  }
  return node;
}

const isString = (v) => typeof v === "string";

export function createCardForm(card) {
  const data = card.data || {};
  const ext = data.extensions && typeof data.extensions === "object" ? data.extensions : {};
  const depth = ext.depth_prompt && typeof ext.depth_prompt === "object" ? ext.depth_prompt : {};

  const inputs = {
    name: textInput(data.name, { required: true, autocomplete: "off" }),
    nickname: textInput(data.nickname),
    description: textArea(data.description, 6),
    personality: textArea(data.personality, 3),
    scenario: textArea(data.scenario, 3),
    first_mes: textArea(data.first_mes, 5),
    mes_example: textArea(data.mes_example, 6),
    creator_notes: textArea(data.creator_notes, 3),
    system_prompt: textArea(data.system_prompt, 3),
    post_history_instructions: textArea(data.post_history_instructions, 3),
    tags: textInput((Array.isArray(data.tags) ? data.tags : []).join(", ")),
    creator: textInput(data.creator),
    character_version: textInput(data.character_version == null ? "" : String(data.character_version)),
    source: textArea((Array.isArray(data.source) ? data.source : []).join("\n"), 2),
    talkativeness: h("input", {
      type: "number",
      min: 0,
      max: 1,
      step: 0.05,
      value: ext.talkativeness ?? DEFAULT_TALKATIVENESS,
    }),
    depth_text: textArea(depth.prompt, 3),
    depth_depth: h("input", { type: "number", min: 0, step: 1, value: depth.depth ?? 4 }),
    depth_role: h("select", {}, ROLES.map((r) => h("option", { value: r }, r))),
  };
  inputs.depth_role.value = ROLES.includes(depth.role) ? depth.role : "system";
  const greetings = createGreetings(data.alternate_greetings, { label: t("Alternate greetings"), noun: t("Greeting") });
  const groupGreetings = createGreetings(data.group_only_greetings, {
    label: t("Group-only greetings"),
    noun: t("Group greeting"),
  });

  // JSON path (as the server names a field) -> the control to mark
  const targets = [
    ["data.name", inputs.name],
    ["data.nickname", inputs.nickname],
    ["data.description", inputs.description],
    ["data.personality", inputs.personality],
    ["data.scenario", inputs.scenario],
    ["data.first_mes", inputs.first_mes],
    ["data.mes_example", inputs.mes_example],
    ["data.creator_notes", inputs.creator_notes],
    ["data.system_prompt", inputs.system_prompt],
    ["data.post_history_instructions", inputs.post_history_instructions],
    ["data.tags", inputs.tags],
    ["data.creator", inputs.creator],
    ["data.character_version", inputs.character_version],
    ["data.source", inputs.source],
    ["data.alternate_greetings", greetings.node],
    ["data.group_only_greetings", groupGreetings.node],
    ["data.extensions.talkativeness", inputs.talkativeness],
    ["data.extensions.depth_prompt.prompt", inputs.depth_text],
    ["data.extensions.depth_prompt.depth", inputs.depth_depth],
    ["data.extensions.depth_prompt.role", inputs.depth_role],
    ["data.extensions.depth_prompt", inputs.depth_text],
  ];

  const section = (title, ...children) => h("fieldset", { class: "card-section" }, h("legend", {}, title), ...children);
  const node = h(
    "div",
    { class: "card-form" },
    section(
      t("Character"),
      field(t("Name"), inputs.name),
      field(t("Description"), inputs.description, t("Always in the prompt: who they are, how they look.")),
      field(t("First message"), inputs.first_mes, t("The greeting a new chat opens with.")),
      greetings.node,
    ),
    section(
      t("Personality and scenario"),
      field(t("Personality"), inputs.personality),
      field(t("Scenario"), inputs.scenario),
      field(t("Example messages"), inputs.mes_example, t("Start each example with <START>.")),
    ),
    section(
      t("Prompt overrides"),
      field(t("System prompt"), inputs.system_prompt, t("Replaces the main prompt; {{original}} keeps it.")),
      field(t("Post-history instructions"), inputs.post_history_instructions),
      h(
        "fieldset",
        { class: "depth-prompt" },
        h("legend", {}, t("Character's note (depth prompt)")),
        field(t("Note text"), inputs.depth_text, t("Inserted into the chat at a depth.")),
        h("div", { class: "fields" }, field(t("Depth"), inputs.depth_depth), field(t("Role"), inputs.depth_role)),
      ),
    ),
    section(
      t("About the card"),
      h(
        "div",
        { class: "fields" },
        field(t("Creator"), inputs.creator),
        field(t("Character version"), inputs.character_version),
        field(t("Talkativeness"), inputs.talkativeness, t("0 to 1: how often they speak in a group.")),
      ),
      field(t("Tags (comma separated)"), inputs.tags),
      field(t("Creator's notes"), inputs.creator_notes),
    ),
    h(
      "details",
      { class: "card-section v3" },
      h("summary", {}, t("More (V3 card fields)")),
      field(t("Nickname"), inputs.nickname, t("Used for {{char}} when set.")),
      groupGreetings.node,
      field(t("Sources (one a line)"), inputs.source),
    ),
  );

  // -- errors ------------------------------------------------------------------------------

  function clearErrors() {
    for (const note of node.querySelectorAll(".field-error")) note.remove();
    for (const bad of node.querySelectorAll("[aria-invalid]")) {
      bad.removeAttribute("aria-invalid");
      if (bad.dataset.hint) bad.setAttribute("aria-describedby", bad.dataset.hint);
      else bad.removeAttribute("aria-describedby");
    }
  }

  function labelOf(control) {
    const label = control.id && node.querySelector(`label[for="${control.id}"]`);
    if (label) return label.textContent;
    const legend = control.querySelector && control.querySelector("legend");
    return legend ? legend.textContent : "";
  }

  // Mark the control `path` names (the longest known prefix) and say why next to it; returns
  // the field's label (for the alert), or "" when the path names nothing shown here.
  function showError(path, message) {
    const found = targets
      .filter(([p]) => path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`))
      .sort((a, b) => b[0].length - a[0].length)[0];
    if (!found) return "";
    const control = found[1];
    const id = `field-error-${++uniqueId}`;
    const note = h("p", { class: "field-error", id }, message);
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-describedby", [id, control.dataset.hint].filter(Boolean).join(" "));
    const holder = control.closest(".field") || control;
    holder.append(note);
    const first = control.matches("input, textarea, select") ? control : control.querySelector("textarea, button");
    if (first) first.focus();
    return labelOf(control);
  }

  // The first bad value before sending: [path, message] or null.
  function check() {
    if (!inputs.name.value.trim()) return ["data.name", t("a character needs a name")];
    const talk = inputs.talkativeness;
    const often = Number(talk.value);
    if (talk.validity.badInput || talk.value === "" || !(often >= 0 && often <= 1)) {
      return ["data.extensions.talkativeness", t("must be a number from 0 to 1")];
    }
    const d = inputs.depth_depth;
    const n = Number(d.value);
    if (d.validity.badInput || d.value === "" || !Number.isInteger(n) || n < 0 || n > 10000) {
      return ["data.extensions.depth_prompt.depth", t("must be a whole number from 0 to 10000")];
    }
    return null;
  }

  // -- reading -----------------------------------------------------------------------------

  function read(base) {
    const out = structuredClone(base);
    const d = (out.data = out.data && typeof out.data === "object" ? out.data : {});
    const setText = (key, value) => {
      // an empty box over a missing or null field leaves it as it was
      if ((d[key] === undefined || d[key] === null) && value === "") return;
      d[key] = value;
    };
    d.name = inputs.name.value.trim();
    for (const key of [
      "description",
      "personality",
      "scenario",
      "first_mes",
      "mes_example",
      "creator_notes",
      "system_prompt",
      "post_history_instructions",
      "creator",
    ]) {
      setText(key, inputs[key].value);
    }
    if (isString(d.nickname) || inputs.nickname.value) d.nickname = inputs.nickname.value || null;
    const version = inputs.character_version.value;
    if (String(d.character_version ?? "") !== version) d.character_version = version;
    const tags = splitList(inputs.tags.value, ",");
    if (!sameList(tags, Array.isArray(d.tags) ? d.tags : [])) d.tags = tags;
    const sources = splitList(inputs.source.value, "\n");
    if (!sameList(sources, Array.isArray(d.source) ? d.source : [])) d.source = sources;
    const greets = greetings.read();
    if (greets.length || Array.isArray(d.alternate_greetings)) d.alternate_greetings = greets;
    const group = groupGreetings.read();
    if (group.length || Array.isArray(d.group_only_greetings)) d.group_only_greetings = group;

    const e = (d.extensions = d.extensions && typeof d.extensions === "object" ? d.extensions : {});
    const talk = Number(inputs.talkativeness.value);
    if (!("talkativeness" in e) ? talk !== DEFAULT_TALKATIVENESS : Number(e.talkativeness) !== talk) {
      e.talkativeness = talk;
    }
    const note = {
      prompt: inputs.depth_text.value,
      depth: Number(inputs.depth_depth.value),
      role: inputs.depth_role.value,
    };
    const had = e.depth_prompt && typeof e.depth_prompt === "object";
    if (had || note.prompt || note.depth !== 4 || note.role !== "system") {
      e.depth_prompt = { ...(had ? e.depth_prompt : {}), ...note };
    }
    return out;
  }

  return { node, read, check, showError, clearErrors, nameInput: inputs.name };
}

function splitList(text, sep) {
  const seen = new Set();
  const out = [];
  for (const part of text.split(sep)) {
    const item = part.trim();
    if (item && !seen.has(item)) {
      seen.add(item);
      out.push(item);
    }
  }
  return out;
}

function sameList(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
