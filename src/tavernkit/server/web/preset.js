// Chat-completion presets: the list (#/presets, with the text-completion presets of
// textgen.js below it) and the prompt manager of one (#/preset/<id>):
// the prompts in their order (move up / down, switch on / off), each prompt's text, role and
// injection (relative, or in chat at a depth), and the samplers. Saved whole with PUT.

import { createAlerts } from "./alerts.js";
import { api, isStale } from "./api.js";
import { reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";
import { textgenList } from "./textgen.js";
import { t } from "./i18n.js";

export const SAMPLERS = [
  ["temperature", t("Temperature"), 0.01],
  ["top_p", t("Top P"), 0.01],
  ["top_k", t("Top K"), 1],
  ["min_p", t("Min P"), 0.01],
  ["frequency_penalty", t("Frequency penalty"), 0.01],
  ["presence_penalty", t("Presence penalty"), 0.01],
  ["repetition_penalty", t("Repetition penalty"), 0.01],
  ["openai_max_tokens", t("Max response tokens"), 1],
  ["openai_max_context", t("Context size"), 1],
];
// SillyTavern keeps the global prompt order under this dummy character id.
const GLOBAL_ORDER_ID = 100001;

export async function showPresets(view) {
  const [page, textgen] = await Promise.all([
    api("GET", "/presets/chat?limit=500"),
    api("GET", "/presets/textgen?limit=500"),
  ]);
  view.append(
    h("h1", {}, t("Chat presets")),
    page.items.length
      ? h(
          "ul",
          { class: "chat-list", "aria-label": t("Chat presets") },
          page.items.map((p) => h("li", {}, h("a", { href: `#/preset/${encodeURIComponent(p.id)}` }, p.name))),
        )
      : h("p", { class: "muted" }, t("No chat presets yet: make one here, or import SillyTavern presets on the characters screen.")),
    newChatPreset(),
    ...textgenList(textgen.items),
  );
}

// The list was a dead end when empty: a preset could only be made from a chat's side panel.
function newChatPreset() {
  const name = h("input", { maxlength: 200, autocomplete: "off" });
  const make = button(t("New chat preset"), async () => {
    try {
      const made = await api("POST", "/presets/chat", { name: name.value.trim() });
      window.location.hash = `#/preset/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });
  return h("div", { class: "row new-preset" }, h("label", { class: "field" }, t("New chat preset name"), name), make);
}

// The order list the prompt manager edits; a preset without prompts or an order starts from
// SillyTavern's defaults (what it runs with anyway), written out when saved.
async function orderOf(data) {
  const lists = Array.isArray(data.prompt_order) ? data.prompt_order : [];
  const list = lists.find((l) => String(l.character_id) === String(GLOBAL_ORDER_ID)) || lists[lists.length - 1];
  if (list && list.order.length && (data.prompts || []).length) return list;
  const defaults = await api("GET", "/ui/presets/chat/defaults");
  if (!(data.prompts || []).length) data.prompts = defaults.prompts;
  const made = { character_id: GLOBAL_ORDER_ID, order: list && list.order.length ? list.order : defaults.order };
  data.prompt_order = [...lists.filter((l) => l !== list), made];
  return made;
}

export async function showPreset(view, ref) {
  const record = await api("GET", `/presets/chat/${encodeURIComponent(ref)}`);
  const alerts = createAlerts();
  let revision = record.revision; // sent with each save (If-Match), the saved one after it
  const data = structuredClone(record.data);
  const order = await orderOf(data);
  const prompts = new Map((data.prompts || []).map((p) => [p.identifier, p]));
  const list = h("ol", { class: "prompt-order", "aria-label": t("Prompt order") });

  function promptItem(item, index) {
    const prompt = prompts.get(item.identifier) || { identifier: item.identifier, name: item.identifier };
    const label = prompt.name || item.identifier;
    const enabled = h("input", { type: "checkbox", checked: item.enabled !== false, "aria-label": t("Enable {label}", { label }) });
    enabled.addEventListener("change", () => {
      item.enabled = enabled.checked;
    });
    const move = (delta) => () => {
      const to = index + delta;
      if (to < 0 || to >= order.order.length) return;
      [order.order[index], order.order[to]] = [order.order[to], order.order[index]];
      draw();
      list.querySelector(`[data-identifier="${CSS.escape(item.identifier)}"] button`)?.focus();
    };
    const details = h("details", {}, h("summary", {}, t("Edit")));
    if (!prompt.marker) {
      const content = h("textarea", { rows: 4, "aria-label": t("Content of {label}", { label }) });
      content.value = prompt.content || "";
      content.addEventListener("input", () => {
        prompt.content = content.value;
      });
      const role = h("select", { "aria-label": t("Role of {label}", { label }) }, ["system", "user", "assistant"].map((r) => h("option", { value: r }, r)));
      role.value = prompt.role || "system";
      role.addEventListener("change", () => {
        prompt.role = role.value;
      });
      const position = h(
        "select",
        { "aria-label": t("Injection position of {label}", { label }) },
        h("option", { value: 0 }, t("relative (in the order)")),
        h("option", { value: 1 }, t("in chat at depth")),
      );
      position.value = String(prompt.injection_position ?? 0);
      position.addEventListener("change", () => {
        prompt.injection_position = Number(position.value);
      });
      const depth = h("input", { type: "number", min: 0, value: prompt.injection_depth ?? 4, "aria-label": t("Injection depth of {label}", { label }) });
      depth.addEventListener("input", () => {
        prompt.injection_depth = Number(depth.value) || 0;
      });
      details.append(content, h("div", { class: "row" }, role, position, depth));
    } else {
      details.append(h("p", {}, t("A marker: its text comes from the card, the chat or the lorebooks.")));
    }
    return h(
      "li",
      { class: "card", dataset: { identifier: item.identifier } },
      h(
        "div",
        { class: "row" },
        button("↑", move(-1), { "aria-label": t("Move {label} up", { label }), disabled: index === 0 }),
        button("↓", move(1), { "aria-label": t("Move {label} down", { label }), disabled: index === order.order.length - 1 }),
        h("label", {}, enabled, ` ${label}`),
      ),
      details,
    );
  }

  function draw() {
    list.replaceChildren(...order.order.map(promptItem));
  }
  draw();

  const samplers = h(
    "div",
    { class: "fields", "aria-label": t("Samplers") },
    SAMPLERS.map(([key, label, step]) => {
      const input = h("input", { type: "number", step, value: data[key] ?? "", "aria-label": label });
      input.addEventListener("input", () => {
        if (input.value !== "") data[key] = Number(input.value);
      });
      return h("label", { class: "field" }, label, input);
    }),
  );
  const save = button(
    t("Save preset"),
    async () => {
      data.prompts = [...prompts.values()];
      try {
        const url = `/presets/chat/${encodeURIComponent(record.id)}`;
        const saved = await api("PUT", url, { name: record.name, ...data }, { ifMatch: revision });
        revision = saved.revision;
        toast(t("Preset saved"), "info");
      } catch (error) {
        if (isStale(error)) {
          // another tab or device saved the preset since this page read it: nothing was
          // overwritten; the page keeps the edits until the user reloads
          alerts.show(
            t("This preset was changed in another tab or device, so your save was refused. Reload to see the current preset (your edits here are then lost)."),
            { actions: [{ label: t("Reload preset"), run: () => window.location.reload() }] },
          );
        } else {
          reportError(error);
        }
      }
    },
    { class: "primary" },
  );
  view.append(
    h("div", { class: "toolbar" }, h("h1", {}, record.name), h("a", { href: "#/presets" }, t("All presets")), save),
    alerts.node,
    h("h2", {}, t("Samplers")),
    samplers,
    h("h2", {}, t("Prompts")),
    list,
  );
}
