// Text-completion presets (#/textgen/<id>): the samplers a text-generation backend
// (llama.cpp, text-generation-webui, vLLM, KoboldCpp...) is sent, SillyTavern's names and
// defaults. Saved whole with PUT; the server checks every value's type and names a bad one.

import { createAlerts } from "./alerts.js";
import { api, isStale } from "./api.js";
import { reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";
import { t } from "./i18n.js";

// [key, label, step] for numbers; [key, label] for switches
export const NUMBERS = [
  ["temp", t("Temperature"), 0.01],
  ["top_p", t("Top P"), 0.01],
  ["top_k", t("Top K"), 1],
  ["min_p", t("Min P"), 0.01],
  ["typical_p", t("Typical P"), 0.01],
  ["top_a", t("Top A"), 0.01],
  ["tfs", t("Tail-free sampling"), 0.01],
  ["rep_pen", t("Repetition penalty"), 0.01],
  ["rep_pen_range", t("Repetition penalty range"), 1],
  ["freq_pen", t("Frequency penalty"), 0.01],
  ["presence_pen", t("Presence penalty"), 0.01],
  ["min_temp", t("Dynamic temperature: min"), 0.01],
  ["max_temp", t("Dynamic temperature: max"), 0.01],
  ["dry_multiplier", t("DRY multiplier"), 0.01],
  ["dry_base", t("DRY base"), 0.01],
  ["dry_allowed_length", t("DRY allowed length"), 1],
  ["mirostat_mode", t("Mirostat mode (0, 1, 2)"), 1],
  ["mirostat_tau", t("Mirostat tau"), 0.01],
  ["mirostat_eta", t("Mirostat eta"), 0.01],
];
const SWITCHES = [
  ["temperature_last", t("Temperature last")],
  ["dynatemp", t("Dynamic temperature")],
  ["do_sample", t("Sample (off: greedy)")],
  ["add_bos_token", t("Add BOS token")],
  ["ban_eos_token", t("Ban EOS token")],
  ["skip_special_tokens", t("Skip special tokens")],
];

export function textgenList(items) {
  const name = h("input", { maxlength: 200, autocomplete: "off" });
  const make = button(t("New text preset"), async () => {
    try {
      const made = await api("POST", "/presets/textgen", { name: name.value.trim() });
      window.location.hash = `#/textgen/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });
  return [
    h("h2", {}, t("Text-completion presets")),
    h(
      "ul",
      { class: "chat-list", "aria-label": t("Text-completion presets") },
      items.map((p) => h("li", {}, h("a", { href: `#/textgen/${encodeURIComponent(p.id)}` }, p.name))),
    ),
    h("div", { class: "row new-preset" }, h("label", { class: "field" }, t("New text preset name"), name), make),
  ];
}

export async function showTextgenPreset(view, ref) {
  const [record, defaults] = await Promise.all([
    api("GET", `/presets/textgen/${encodeURIComponent(ref)}`),
    api("GET", "/ui/presets/textgen/defaults"),
  ]);
  const alerts = createAlerts();
  let revision = record.revision; // sent with each save (If-Match), the saved one after it
  // a key the preset leaves out runs with SillyTavern's default: shown, and written on save
  const data = { ...defaults, ...structuredClone(record.data) };
  const numbers = NUMBERS.map(([key, label, step]) => {
    const input = h("input", { type: "number", step, value: data[key] ?? "", "aria-label": label });
    input.addEventListener("input", () => {
      if (input.value === "") delete data[key];
      else data[key] = Number(input.value);
    });
    return h("label", { class: "field" }, label, input);
  });
  const switches = SWITCHES.map(([key, label]) => {
    const input = h("input", { type: "checkbox", checked: Boolean(data[key]), "aria-label": label });
    input.addEventListener("change", () => {
      data[key] = input.checked;
    });
    return h("label", { class: "field check" }, input, label);
  });
  const save = button(
    t("Save preset"),
    async () => {
      try {
        const url = `/presets/textgen/${encodeURIComponent(record.id)}`;
        const saved = await api("PUT", url, { ...data, name: record.name }, { ifMatch: revision });
        revision = saved.revision;
        toast(t("Preset saved"), "info");
      } catch (error) {
        // a refused value names its field; the stored preset is unchanged either way
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
    h("div", { class: "fields", "aria-label": t("Samplers") }, numbers),
    h("div", { class: "fields", "aria-label": t("Switches") }, switches),
  );
}
