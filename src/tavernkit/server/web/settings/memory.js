// Settings > Memory: every memory setting (what `tavernkit memory set` changes): the rolling
// summary and the vector memory (chat memory, vectorized lorebook entries, the embedder).
// The chat's side panel has the common ones beside the chat's summary (chat/memory.js); this
// is the full set. Drawn when opened; PATCH /memory/settings sends only what changed.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { fieldset, settingGroup } from "./form.js";
import { t } from "../i18n.js";

const POSITIONS = [
  [-1, t("Not in the prompt")],
  [2, t("Before the main prompt")],
  [0, t("After the main prompt")],
  [1, t("In the chat at depth")],
];
const ROLES = [
  [0, t("System")],
  [1, t("User")],
  [2, t("Assistant")],
];

// keys as the server spells them (the summary's are SillyTavern's camelCase)
const SUMMARY = [
  { key: "source", label: t("Summarize"), kind: "select", choices: [["extras", t("Off")], ["main", t("With the chat's model")]] },
  { key: "memoryFrozen", label: t("Pause summaries") },
  { key: "promptInterval", label: t("Every N messages (0: never)") },
  { key: "promptForceWords", label: t("Or every N words (0: off)") },
  { key: "promptWords", label: t("Summary length (words)") },
  { key: "overrideResponseLength", label: t("Summary response length (tokens, 0: the chat's)") },
  { key: "maxMessagesPerRequest", label: t("Messages per summary request (0: all)") },
  { key: "prompt_builder", label: t("Prompt builder"), kind: "select", choices: [[0, t("Classic (the whole character prompt)")], [1, t("Raw (the summary prompt and new messages)")], [2, t("Raw, blocking")]] },
  { key: "position", label: t("Summary position"), kind: "select", choices: POSITIONS },
  { key: "depth", label: t("Summary depth") },
  { key: "role", label: t("Summary role"), kind: "select", choices: ROLES },
  { key: "SkipWIAN", label: t("Leave world info and the author's note out") },
  { key: "scan", label: t("Lorebooks scan the summary") },
  { key: "template", label: t("Summary template"), kind: "textarea" },
  { key: "prompt", label: t("Summary prompt"), kind: "textarea" },
];

function vectorSpecs(profiles) {
  return [
    { key: "enabled_chats", label: t("Chat memory (vectorize messages)") },
    { key: "enabled_world_info", label: t("Vectorized lorebook entries") },
    { key: "enabled_for_all", label: t("Every entry, not only vectorized ones") },
    { key: "include_wi", label: t("Vectorize the world info in messages") },
    { key: "keep_hidden", label: t("Keep hidden messages") },
    { key: "embedder", label: t("Embedder"), kind: "select", choices: [["local", t("Built in (offline MiniLM)")], ...profiles.map((p) => [`profile:${p.name}`, t("Profile {name} (/embeddings)", { name: p.name })])] },
    { key: "embedding_model", label: t("Embedding model (profiles only)") },
    { key: "insert", label: t("Messages to recall") },
    { key: "query", label: t("Messages the query reads") },
    { key: "protect", label: t("Newest messages never recalled") },
    { key: "message_chunk_size", label: t("Chunk size (characters)") },
    { key: "force_chunk_delimiter", label: t("Chunk delimiter") },
    { key: "score_threshold", label: t("Score threshold"), step: "0.05" },
    { key: "max_entries", label: t("Vectorized entries (max)") },
    { key: "position", label: t("Memory position"), kind: "select", choices: POSITIONS.slice(1) },
    { key: "depth", label: t("Memory depth") },
    { key: "template", label: t("Memory template"), kind: "textarea" },
  ];
}

export function memorySection() {
  const alerts = createAlerts();
  const body = h("div");
  const node = h("details", { class: "card settings-more", "aria-label": t("Memory") }, h("summary", {}, h("h2", {}, t("Memory"))), alerts.node, body);
  const render = async () => {
    const [settings, profiles] = await Promise.all([api("GET", "/memory/settings"), api("GET", "/profiles")]);
    const summary = settingGroup(SUMMARY, settings.summary);
    const vectors = settingGroup(vectorSpecs(profiles), settings.vectors);
    const form = h(
      "form",
      { "aria-label": t("Memory settings") },
      fieldset(t("Summaries"), summary.nodes),
      fieldset(t("Vector memory"), vectors.nodes),
      h("button", { type: "submit" }, t("Save memory settings")),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const change = {};
      for (const [section, group] of [["summary", summary], ["vectors", vectors]]) {
        const changed = group.changes();
        if (Object.keys(changed).length) change[section] = changed;
      }
      if (!Object.keys(change).length) return toast(t("Nothing changed"), "info");
      // no edits while it saves: the form is drawn again from what was stored, and an edit
      // typed into the old one would be lost; "saved" shows once the new one is there
      form.inert = true;
      try {
        await api("PATCH", "/memory/settings", change);
        await render();
        toast(t("Memory settings saved"), "info");
      } catch (error) {
        alerts.show(errorText(error, { withField: true })); // the server names the setting; nothing was stored
      } finally {
        form.inert = false;
      }
    });
    body.replaceChildren(form);
  };
  let drawn = false;
  node.addEventListener("toggle", () => {
    if (!node.open || drawn) return;
    drawn = true;
    render().catch((error) => {
      drawn = false;
      alerts.show(errorText(error, { withField: true }), { retry: () => render() });
    });
  });
  return node;
}
