// Settings > Memory: every memory setting (what `tavernkit memory set` changes): the rolling
// summary and the vector memory (chat memory, vectorized lorebook entries, the embedder).
// The chat's side panel has the common ones beside the chat's summary (chat/memory.js); this
// is the full set. Drawn when opened; PATCH /memory/settings sends only what changed.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { fieldset, settingGroup } from "./form.js";

const POSITIONS = [
  [-1, "Not in the prompt"],
  [2, "Before the main prompt"],
  [0, "After the main prompt"],
  [1, "In the chat at depth"],
];
const ROLES = [
  [0, "System"],
  [1, "User"],
  [2, "Assistant"],
];

// keys as the server spells them (the summary's are SillyTavern's camelCase)
const SUMMARY = [
  { key: "source", label: "Summarize", kind: "select", choices: [["extras", "Off"], ["main", "With the chat's model"]] },
  { key: "memoryFrozen", label: "Pause summaries" },
  { key: "promptInterval", label: "Every N messages (0: never)" },
  { key: "promptForceWords", label: "Or every N words (0: off)" },
  { key: "promptWords", label: "Summary length (words)" },
  { key: "overrideResponseLength", label: "Summary response length (tokens, 0: the chat's)" },
  { key: "maxMessagesPerRequest", label: "Messages per summary request (0: all)" },
  { key: "prompt_builder", label: "Prompt builder", kind: "select", choices: [[0, "Classic (the whole character prompt)"], [1, "Raw (the summary prompt and new messages)"], [2, "Raw, blocking"]] },
  { key: "position", label: "Summary position", kind: "select", choices: POSITIONS },
  { key: "depth", label: "Summary depth" },
  { key: "role", label: "Summary role", kind: "select", choices: ROLES },
  { key: "SkipWIAN", label: "Leave world info and the author's note out" },
  { key: "scan", label: "Lorebooks scan the summary" },
  { key: "template", label: "Summary template", kind: "textarea" },
  { key: "prompt", label: "Summary prompt", kind: "textarea" },
];

function vectorSpecs(profiles) {
  return [
    { key: "enabled_chats", label: "Chat memory (vectorize messages)" },
    { key: "enabled_world_info", label: "Vectorized lorebook entries" },
    { key: "enabled_for_all", label: "Every entry, not only vectorized ones" },
    { key: "include_wi", label: "Vectorize the world info in messages" },
    { key: "keep_hidden", label: "Keep hidden messages" },
    { key: "embedder", label: "Embedder", kind: "select", choices: [["local", "Built in (offline MiniLM)"], ...profiles.map((p) => [`profile:${p.name}`, `Profile ${p.name} (/embeddings)`])] },
    { key: "embedding_model", label: "Embedding model (profiles only)" },
    { key: "insert", label: "Messages to recall" },
    { key: "query", label: "Messages the query reads" },
    { key: "protect", label: "Newest messages never recalled" },
    { key: "message_chunk_size", label: "Chunk size (characters)" },
    { key: "force_chunk_delimiter", label: "Chunk delimiter" },
    { key: "score_threshold", label: "Score threshold", step: "0.05" },
    { key: "max_entries", label: "Vectorized entries (max)" },
    { key: "position", label: "Memory position", kind: "select", choices: POSITIONS.slice(1) },
    { key: "depth", label: "Memory depth" },
    { key: "template", label: "Memory template", kind: "textarea" },
  ];
}

export function memorySection() {
  const alerts = createAlerts();
  const body = h("div");
  const node = h("details", { class: "card settings-more", "aria-label": "Memory" }, h("summary", {}, h("h2", {}, "Memory")), alerts.node, body);
  const render = async () => {
    const [settings, profiles] = await Promise.all([api("GET", "/memory/settings"), api("GET", "/profiles")]);
    const summary = settingGroup(SUMMARY, settings.summary);
    const vectors = settingGroup(vectorSpecs(profiles), settings.vectors);
    const form = h(
      "form",
      { "aria-label": "Memory settings" },
      fieldset("Summaries", summary.nodes),
      fieldset("Vector memory", vectors.nodes),
      h("button", { type: "submit" }, "Save memory settings"),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const change = {};
      for (const [section, group] of [["summary", summary], ["vectors", vectors]]) {
        const changed = group.changes();
        if (Object.keys(changed).length) change[section] = changed;
      }
      if (!Object.keys(change).length) return toast("Nothing changed", "info");
      try {
        await api("PATCH", "/memory/settings", change);
        toast("Memory settings saved", "info");
        await render();
      } catch (error) {
        alerts.show(errorText(error, { withField: true })); // the server names the setting; nothing was stored
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
