// The chat side panel's Memory: the chat's summary box (edit it, or make one now with the
// chat's model), the summary settings and the vector memory settings (chat memory and
// vectorized lorebook entries). Settings are the user's (every chat), saved key by key.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { reportError, toast } from "../toast.js";
import { t } from "../i18n.js";

const POSITIONS = [
  ["-1", t("Not in the prompt")],
  ["2", t("Before the main prompt")],
  ["0", t("After the main prompt")],
  ["1", t("In the chat at depth")],
];
const ROLES = [
  ["0", t("System")],
  ["1", t("User")],
  ["2", t("Assistant")],
];

// One labelled control for `key` of `section` (as the server spells it), kept in `changes`.
function field(label, section, key, value, changes, options = {}) {
  let input;
  const note = (v) => {
    changes[section] = { ...(changes[section] || {}), [key]: v };
  };
  if (typeof value === "boolean") {
    input = h("input", { type: "checkbox", checked: value });
    input.addEventListener("change", () => note(input.checked));
    return h("label", { class: "field check" }, input, label);
  }
  if (options.choices) {
    input = h("select", {}, ...options.choices.map(([v, text]) => h("option", { value: v }, text)));
    input.value = String(value);
    input.addEventListener("change", () => note(options.text ? input.value : Number(input.value)));
  } else if (typeof value === "number") {
    input = h("input", { type: "number", value, step: options.step || 1 });
    input.addEventListener("change", () => note(Number(input.value)));
  } else {
    input = h("textarea", { rows: 3 });
    input.value = value;
    input.addEventListener("change", () => note(input.value));
  }
  // named by its label alone (a <select> inside a <label> would add its option to the name)
  input.setAttribute("aria-label", label);
  return h("label", { class: "field" }, label, input);
}

export async function memoryPanel(chatId) {
  const url = `/chats/${encodeURIComponent(chatId)}/summary`;
  const [summary, settings] = await Promise.all([api("GET", url), api("GET", "/memory/settings")]);
  const box = h("textarea", { rows: 4, "aria-label": t("Chat summary") });
  box.value = summary.text;
  const changes = {};
  const s = settings.summary;
  const v = settings.vectors;

  const saveSummary = button(t("Save summary"), async () => {
    try {
      await api("PUT", url, { text: box.value });
      toast(t("Summary saved"), "info");
    } catch (error) {
      reportError(error);
    }
  });
  const summarizeNow = button(t("Summarize now"), async () => {
    summarizeNow.disabled = true;
    try {
      const made = await api("POST", `${url}/now`);
      if (made.message_index === null) toast(t("Nothing new to summarize"), "info");
      else {
        box.value = made.text;
        toast(t("Summary made"), "info");
      }
    } catch (error) {
      reportError(error);
    } finally {
      summarizeNow.disabled = false;
    }
  });
  const saveSettings = button(t("Save memory settings"), async () => {
    try {
      await api("PATCH", "/memory/settings", changes);
      for (const key of Object.keys(changes)) delete changes[key];
      toast(t("Memory settings saved"), "info");
    } catch (error) {
      reportError(error);
    }
  });

  return h(
    "details",
    { class: "panel memory" },
    h("summary", {}, t("Memory")),
    box,
    h("div", { class: "row" }, saveSummary, summarizeNow),
    h(
      "fieldset",
      {},
      h("legend", {}, t("Summaries (every chat)")),
      field(t("Summarize"), "summary", "source", s.source, changes, {
        text: true,
        choices: [
          ["extras", t("Off")],
          ["main", t("With the chat's model")],
        ],
      }),
      field(t("Pause summaries"), "summary", "memoryFrozen", s.memoryFrozen, changes),
      field(t("Every N messages"), "summary", "promptInterval", s.promptInterval, changes),
      field(t("Summary length (words)"), "summary", "promptWords", s.promptWords, changes),
      field(t("Summary position"), "summary", "position", s.position, changes, { choices: POSITIONS }),
      field(t("Summary depth"), "summary", "depth", s.depth, changes),
      field(t("Summary role"), "summary", "role", s.role, changes, { choices: ROLES }),
      field(t("Summary template"), "summary", "template", s.template, changes),
      field(t("Summary prompt"), "summary", "prompt", s.prompt, changes),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, t("Vector memory (every chat)")),
      field(t("Chat memory (vectorize messages)"), "vectors", "enabled_chats", v.enabled_chats, changes),
      field(t("Vectorized lorebook entries"), "vectors", "enabled_world_info", v.enabled_world_info, changes),
      field(t("Every entry, not only vectorized ones"), "vectors", "enabled_for_all", v.enabled_for_all, changes),
      field(t("Messages to recall"), "vectors", "insert", v.insert, changes),
      field(t("Messages the query reads"), "vectors", "query", v.query, changes),
      field(t("Score threshold"), "vectors", "score_threshold", v.score_threshold, changes, { step: 0.05 }),
      field(t("Memory position"), "vectors", "position", v.position, changes, { choices: POSITIONS.slice(1) }),
      field(t("Memory depth"), "vectors", "depth", v.depth, changes),
      field(t("Memory template"), "vectors", "template", v.template, changes),
    ),
    saveSettings,
  );
}
