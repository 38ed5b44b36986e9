// One regex script (#/regex/<id>, #/regex/new): SillyTavern's editor — name, find pattern,
// replacement, trim strings, where it applies (placements), what it changes (stored text,
// display, prompt), edits, macros in the pattern, the depth window — with a live test box
// that runs the script as edited on a sample text.

import { ApiError, api } from "../api.js";
import { createAlerts } from "../alerts.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

const PLACEMENTS = [
  [1, t("User input")],
  [2, t("AI output")],
  [3, t("Slash commands")],
  [5, t("World info")],
  [6, t("Reasoning")],
];
const MACROS = [
  [0, t("Don't substitute")],
  [1, t("Substitute (raw)")],
  [2, t("Substitute (escaped)")],
];

// A script's one-line description for lists: where it applies and what it changes.
export function summary(script) {
  const names = Object.fromEntries(PLACEMENTS);
  const where = Array.isArray(script.placement) ? script.placement.map((p) => names[p] || t("placement {p}", { p })) : [];
  let what = t("changes what is stored");
  if (script.markdownOnly && script.promptOnly) what = t("changes the display and the prompt");
  else if (script.markdownOnly) what = t("changes the display only");
  else if (script.promptOnly) what = t("changes the prompt only");
  return t("{where}: {what}", { where: where.join(", ") || t("nowhere"), what });
}

function labelled(text, control, className = "field") {
  return className.includes("check") ? h("label", { class: className }, control, text) : h("label", { class: className }, text, control);
}

function depthValue(input) {
  const text = input.value.trim();
  if (!text) return null;
  const number = Number.parseInt(text, 10);
  return Number.isNaN(number) ? null : number;
}

export async function showRegexScript(view, ref) {
  const alerts = createAlerts();
  const isNew = !ref || ref === "new";
  let script = {
    scriptName: "",
    findRegex: "",
    replaceString: "",
    trimStrings: [],
    placement: [1],
    disabled: false,
    markdownOnly: true,
    promptOnly: false,
    runOnEdit: true,
    substituteRegex: 0,
    minDepth: null,
    maxDepth: null,
  };
  if (!isNew) {
    try {
      script = await api("GET", `/regex/scripts/${encodeURIComponent(ref)}`);
    } catch (error) {
      view.append(alerts.node);
      alerts.show(errorText(error));
      return undefined;
    }
  }

  const name = h("input", { value: script.scriptName ?? "" });
  const find = h("input", { value: String(script.findRegex ?? ""), class: "mono", spellcheck: "false" });
  const replace = h("textarea", { rows: 3, class: "mono", spellcheck: "false" });
  replace.value = String(script.replaceString ?? "");
  const trims = h("textarea", { rows: 2, class: "mono", spellcheck: "false" });
  trims.value = Array.isArray(script.trimStrings) ? script.trimStrings.join("\n") : "";
  const placements = PLACEMENTS.map(([value, text]) => {
    const box = h("input", { type: "checkbox", value: String(value) });
    box.checked = Array.isArray(script.placement) && script.placement.includes(value);
    return [value, labelled(text, box, "field check"), box];
  });
  const box = (checked) => {
    const node = h("input", { type: "checkbox" });
    node.checked = Boolean(checked);
    return node;
  };
  const display = box(script.markdownOnly);
  const prompt = box(script.promptOnly);
  const onEdit = box(script.runOnEdit);
  const disabled = box(script.disabled);
  const macros = h("select", {}, ...MACROS.map(([value, text]) => h("option", { value: String(value) }, text)));
  macros.value = String(Number(script.substituteRegex) || 0);
  const minDepth = h("input", { type: "number", min: "-1", value: script.minDepth ?? "" });
  const maxDepth = h("input", { type: "number", min: "0", value: script.maxDepth ?? "" });

  // the script as the form says (SillyTavern's field names)
  function edited() {
    return {
      scriptName: name.value.trim(),
      findRegex: find.value,
      replaceString: replace.value,
      trimStrings: trims.value.split("\n").filter((line) => line),
      placement: placements.filter(([, , node]) => node.checked).map(([value]) => value),
      disabled: disabled.checked,
      markdownOnly: display.checked,
      promptOnly: prompt.checked,
      runOnEdit: onEdit.checked,
      substituteRegex: Number(macros.value),
      minDepth: depthValue(minDepth),
      maxDepth: depthValue(maxDepth),
    };
  }

  // -- the test box: the script as edited, on any text, whatever its placement ----------------
  const sample = h("textarea", { rows: 3 });
  const result = h("output", { class: "regex-output" });
  const validity = h("p", { class: "muted", role: "status" });
  let pending = 0;
  async function runTest() {
    const mine = ++pending;
    try {
      const answer = await api("POST", "/regex/test", { script: edited(), text: sample.value });
      if (mine !== pending) return;
      result.textContent = answer.output;
      validity.textContent = answer.valid ? "" : t("The find pattern is not a valid regex: the script does nothing.");
    } catch (error) {
      if (mine === pending) validity.textContent = errorText(error);
    }
  }
  let timer = 0;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(runTest, 150);
  };
  for (const control of [name, find, replace, trims, sample, minDepth, maxDepth]) control.addEventListener("input", later);
  for (const control of [macros, display, prompt, onEdit, disabled, ...placements.map(([, , node]) => node)]) control.addEventListener("change", later);

  async function save() {
    const body = edited();
    if (!body.scriptName) {
      alerts.show(t("A script needs a name."));
      name.focus();
      return;
    }
    try {
      const saved = isNew
        ? await api("POST", "/regex/scripts", body)
        : await api("PATCH", `/regex/scripts/${encodeURIComponent(script.id)}`, body);
      toast(t("Saved {scriptName}", { scriptName: saved.scriptName }), "info");
      window.location.hash = "#/regex";
    } catch (error) {
      alerts.show(errorText(error, { withField: error instanceof ApiError }));
    }
  }

  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, isNew ? t("New regex script") : t("Regex script: {scriptName}", { scriptName: script.scriptName })),
      h("a", { class: "button", href: "#/regex" }, t("Back to the scripts")),
    ),
    alerts.node,
    h(
      "div",
      { class: "regex-form card-form" },
      labelled(t("Script name"), name),
      labelled(t("Find regex"), find),
      h("p", { class: "hint muted" }, t("/pattern/flags (g i m s u), or a bare pattern: only the first match.")),
      labelled(t("Replace with"), replace),
      h("p", { class: "hint muted" }, t("{{match}} or $0 is the match, $1 a group, $<name> a named group; macros work.")),
      labelled(t("Trim out"), trims),
      h("p", { class: "hint muted" }, t("One per line: removed from the inserted match and groups.")),
      h("fieldset", {}, h("legend", {}, t("Affects")), ...placements.map(([, node]) => node)),
      h(
        "fieldset",
        {},
        h("legend", {}, t("Changes")),
        labelled(t("Alter chat display"), display, "field check"),
        labelled(t("Alter outgoing prompt"), prompt, "field check"),
        h("p", { class: "hint muted" }, t("Neither: the text is changed where it is stored.")),
        labelled(t("Run on edit"), onEdit, "field check"),
        labelled(t("Disabled"), disabled, "field check"),
      ),
      h("div", { class: "row" }, labelled(t("Macros in the pattern"), macros), labelled(t("Min depth"), minDepth), labelled(t("Max depth"), maxDepth)),
      h("p", { class: "hint muted" }, t("Depths count messages from the newest (0); empty: no limit.")),
      h("div", { class: "row" }, button(t("Save"), save, { class: "primary" }), h("a", { class: "button", href: "#/regex" }, t("Cancel"))),
    ),
    h("section", { class: "regex-test" }, h("h2", {}, t("Test")), labelled(t("Test input"), sample), labelled(t("Test output"), result), validity),
  );
  name.focus();
  return () => clearTimeout(timer);
}
