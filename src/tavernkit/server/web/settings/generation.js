// Settings > Generation: every world info, prompt and reasoning setting and the compatibility
// mode (what `tavernkit settings set` changes). PATCH /settings sends only what changed; a
// value the server refuses is named in the error, and nothing is stored then.

import { api } from "../api.js";
import { h } from "../dom.js";
import { POSITIONS } from "../personas/common.js";
import { reportError, toast } from "../toast.js";
import { fieldset, settingGroup } from "./form.js";
import { t } from "../i18n.js";

const ROLES = [
  [0, t("System")],
  [1, t("User")],
  [2, t("Assistant")],
];

// [section, key, label, kind?, extra?]: a number's range is the server's to check
const WORLD_INFO = [
  ["depth", t("Scan depth (messages)")],
  ["budget", t("Budget (% of context)")],
  ["budget_cap", t("Budget cap (tokens, 0: none)")],
  ["min_activations", t("Min activations")],
  ["min_activations_depth_max", t("Max depth for min activations (0: none)")],
  ["max_recursion_steps", t("Max recursion steps (0: no limit)")],
  ["character_strategy", t("Character lore insertion"), "select", [[0, t("Sorted evenly")], [1, t("Character lore first")], [2, t("Global lore first")]]],
  ["recursive", t("Recursive scan")],
  ["include_names", t("Include names")],
  ["case_sensitive", t("Case-sensitive keys")],
  ["match_whole_words", t("Match whole words")],
  ["use_group_scoring", t("Group scoring")],
  ["overflow_alert", t("Warn when the budget overflows")],
];
const PROMPT = [
  ["max_context", t("Context size (tokens)")],
  ["amount_gen", t("Response length (tokens)")],
  ["token_padding", t("Token padding")],
  ["tokenizer", t("Tokenizer (SillyTavern's number)")],
  ["main_api", t("Main API (SillyTavern's name)")],
  ["instruct_enabled", t("Instruct mode (text completion)")],
  ["instruct_template", t("Instruct template"), "template:instruct"],
  ["context_template", t("Context template"), "template:context"],
  ["sysprompt_enabled", t("Use the system prompt")],
  ["sysprompt", t("System prompt"), "template:sysprompt"],
  ["trim_spaces", t("Trim spaces")],
  ["collapse_newlines", t("Collapse newlines")],
  ["trim_sentences", t("Trim incomplete sentences")],
  ["single_line", t("Single-line replies")],
  ["pin_examples", t("Keep example messages in the prompt")],
  ["strip_examples", t("Strip example messages")],
  ["always_force_name2", t("Always add the character's name")],
  ["prefer_character_prompt", t("Prefer the character's main prompt")],
  ["prefer_character_jailbreak", t("Prefer the character's post-history instructions")],
  ["user_prompt_bias", t("Start replies with")],
  ["show_user_prompt_bias", t("Show the reply start")],
  ["custom_stopping_strings", t("Custom stopping strings (JSON list)"), "textarea"],
  ["custom_stopping_strings_macro", t("Expand macros in stopping strings")],
  ["persona_description_position", t("Persona description position (default)"), "select", POSITIONS],
  ["persona_description_depth", t("Persona description depth (default)")],
  ["persona_description_role", t("Persona description role (default)"), "select", ROLES],
];
const REASONING = [
  ["template", t("Reasoning template"), "template:reasoning"],
  ["auto_parse", t("Parse reasoning from the reply")],
  ["add_to_prompts", t("Send earlier reasoning back")],
  ["max_additions", t("Reasoning blocks sent back (max)")],
  ["auto_expand", t("Expand reasoning when shown")],
  ["show_hidden", t("Show hidden reasoning")],
];

const names = (page) => page.items.map((item) => item.name);

// The specs of `rows` for settingGroup; a template is a name (built-in ones are not listed),
// the stored ones offered.
function specs(rows, templates) {
  return rows.map(([key, label, kind, choices]) => {
    if (kind && kind.startsWith("template:")) {
      const stored = templates[kind.slice("template:".length)] || [];
      return { key, label, kind: "text", suggestions: stored };
    }
    return { key, label, kind, choices };
  });
}

export async function generationSection() {
  const form = h("form", { "aria-label": t("Generation settings") });
  let submit = async () => {};
  const render = async () => {
    const [current, books, ...lists] = await Promise.all([
      api("GET", "/settings"),
      api("GET", "/lorebooks?limit=500"),
      ...["instruct", "context", "sysprompt", "reasoning"].map((kind) => api("GET", `/templates/${kind}?limit=500`)),
    ]);
    const templates = Object.fromEntries(["instruct", "context", "sysprompt", "reasoning"].map((k, i) => [k, names(lists[i])]));
    const groups = {
      world_info: settingGroup(specs(WORLD_INFO, templates), current.world_info),
      prompt: settingGroup(specs(PROMPT, templates), current.prompt),
      reasoning: settingGroup(specs(REASONING, templates), current.reasoning),
    };
    const global = new Set(current.world_info.global_books);
    const bookBoxes = books.items.map((book) => ({
      name: book.name,
      input: h("input", { type: "checkbox", "aria-label": t("Global lorebook {name}", { name: book.name }), checked: global.has(book.name) }),
    }));
    const compat = h(
      "select",
      { "aria-label": t("Compatibility") },
      h("option", { value: "default", selected: current.compat === "default" }, t("Fix them (default)")),
      h("option", { value: "st-1.18", selected: current.compat === "st-1.18" }, t("Reproduce them (st-1.18)")),
    );
    form.replaceChildren(
      fieldset(t("World info"), groups.world_info.nodes),
      h(
        "fieldset",
        { class: "fields", "aria-label": t("Global lorebooks") },
        h("legend", {}, t("Global lorebooks (active in every chat)")),
        ...(bookBoxes.length
          ? bookBoxes.map((b) => h("label", { class: "field check" }, b.input, b.name))
          : [h("span", { class: "muted" }, t("No lorebooks yet: import one or make one under Lorebooks."))]),
      ),
      fieldset(t("Prompt"), groups.prompt.nodes),
      fieldset(t("Reasoning"), groups.reasoning.nodes),
      h("fieldset", { class: "fields" }, h("legend", {}, t("Compatibility")), h("label", { class: "field" }, t("Known SillyTavern bugs"), compat)),
      h("button", { type: "submit" }, t("Save settings")),
    );
    submit = async () => {
      const change = {};
      for (const [section, group] of Object.entries(groups)) {
        const changed = group.changes();
        if (Object.keys(changed).length) change[section] = changed;
      }
      // the stored order is kept (it orders the books' entries); a newly checked book goes last
      const checked = new Set(bookBoxes.filter((b) => b.input.checked).map((b) => b.name));
      const chosen = [
        // a name not listed is kept only when the list was cut short (a deleted book drops)
        ...current.world_info.global_books.filter(
          (name) => checked.has(name) || (books.total > books.items.length && !bookBoxes.some((b) => b.name === name)),
        ),
        ...[...checked].filter((name) => !global.has(name)),
      ];
      if (chosen.join("\n") !== current.world_info.global_books.join("\n")) {
        (change.world_info ??= {}).global_books = chosen;
      }
      if (compat.value !== current.compat) change.compat = compat.value;
      if (!Object.keys(change).length) {
        toast(t("Nothing changed"), "info");
        return;
      }
      await api("PATCH", "/settings", change);
      await render();
      toast(t("Settings saved"), "info"); // once the form shows what was stored
    };
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // no edits while it saves: the form is drawn again from what was stored, and an edit typed
    // before that would be lost
    form.inert = true;
    try {
      await submit();
    } catch (error) {
      reportError(error); // the server names the field; nothing was stored
    } finally {
      form.inert = false;
    }
  });
  await render();
  return h("section", { class: "card", "aria-label": t("Generation") }, h("h2", {}, t("Generation")), form);
}
