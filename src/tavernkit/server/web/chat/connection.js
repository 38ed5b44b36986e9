// The chat screen's connection panel: the active connection profile (the stored ones and the
// embedded model, which runs when none is selected), the chat-completion preset, or for a
// text-completion profile the text preset and the instruct, context and system-prompt
// templates; and the samplers, saved to the preset in force (the profile's own when it binds
// one). Everything here is the user's setting, not the chat's: the next turn (and the prompt
// inspector) uses it; the profile and preset pickers say so ("Applies to all chats"), and so
// does the toast of a change. The same routes as the settings and preset screens: PATCH
// /settings/selections, PATCH /settings, PUT /presets/...

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { SAMPLERS } from "../preset.js";
import { NUMBERS } from "../textgen.js";
import { t } from "../i18n.js";

// the text-completion samplers shown here (the preset screen has them all)
const TEXT_SAMPLERS = ["temp", "top_p", "top_k", "min_p", "rep_pen", "freq_pen", "presence_pen"];
const TEMPLATES = [
  ["instruct_template", "instruct", t("Instruct template")],
  ["context_template", "context", t("Context template")],
  ["sysprompt", "sysprompt", t("System prompt")],
];

const list = (path) => api("GET", `${path}?limit=500`).then((page) => page.items.map((item) => item.name));

// A control under its visible label, named by that text alone (a select's name would
// otherwise take in its chosen option's text).
function field(label, control, className = "field") {
  control.setAttribute("aria-label", label);
  const parts = className.includes("check") ? [control, label] : [label, control];
  return h("label", { class: className }, ...parts);
}

let hints = 0;

// A picker whose choice is the user's, not the chat's (a profile, a preset: as in
// SillyTavern, it applies to every chat): the hint says so beside it, and the control is
// described by it (a screen reader hears it after the name).
function forAllChats(picker) {
  hints += 1;
  const hint = h("small", { class: "applies-all", id: `applies-all-${hints}` }, t("Applies to all chats"));
  picker.querySelector("select").setAttribute("aria-describedby", hint.id);
  return h("div", { class: "all-chats-picker" }, picker, hint);
}

function select(label, choices, current, onPick) {
  const node = h(
    "select",
    {},
    choices.map(([value, text]) => h("option", { value, selected: value === (current ?? "") }, text)),
  );
  node.addEventListener("change", () => onPick(node.value));
  return field(label, node);
}

export async function createConnection() {
  const alerts = createAlerts();
  const summary = h("summary", {}, t("Connection"));
  const body = h("div", { class: "connection-body" });
  const node = h("details", { class: "panel connection" }, summary, alerts.node, body);

  // run a change; a refused one stays on screen with Retry. `redraw`: the panel is drawn again
  // from what is stored (a new profile or preset has other fields).
  // Changes run one after the other (a pick made while the panel redraws is not lost).
  let queue = Promise.resolve();
  const change = (action, redraw = true) => (...args) => {
    queue = queue.then(async () => {
      try {
        await action(...args);
        if (redraw) await render();
      } catch (error) {
        alerts.show(errorText(error), { retry: () => change(action, redraw)(...args) });
        await render().catch(() => {}); // show what is stored
      }
    });
    return queue;
  };
  const keep = (action) => change(action, false);
  const pick = (key, value) => api("PATCH", "/settings/selections", { [key]: value || null });

  async function render() {
    const [profiles, selections, settings] = await Promise.all([
      api("GET", "/profiles"),
      api("GET", "/settings/selections"),
      api("GET", "/settings"),
    ]);
    const embedded = selections.embedded;
    const active = profiles.find((p) => p.name === selections.profile) || null;
    const family = active ? active.api : embedded.api;
    const text = ["text", "kobold", "novel"].includes(family);
    summary.textContent = t("Connection: {name} · {model}", { name: active ? active.name : t("embedded model"), model: active ? active.model || active.source : embedded.model });

    const profileChoices = [
      ...profiles.map((p) => [p.name, `${p.name} (${p.model || p.source})`]),
      ["", (embedded.missing ? t("Embedded model ({model}): not installed", { model: embedded.model }) : t("Embedded model ({model})", { model: embedded.model }))],
    ];
    const parts = [
      forAllChats(select(t("Connection profile"), profileChoices, active ? active.name : "", change(async (value) => {
        await pick("profile", value);
        toast(t("Connection profile for all chats: {name}", { name: value || t("embedded model") }), "info");
      }))),
    ];
    if (!active && embedded.missing) parts.push(h("p", { class: "muted" }, embedded.missing));

    if (text) {
      const [textgen, ...templates] = await Promise.all([
        list("/presets/textgen"),
        ...TEMPLATES.map(([, kind]) => list(`/templates/${kind}`)),
      ]);
      parts.push(
        forAllChats(select(t("Text preset"), [["", t("None (defaults)")], ...textgen.map((n) => [n, n])], selections.textgen_preset, change(async (v) => {
          await pick("textgen_preset", v);
          toast(t("Text preset for all chats: {name}", { name: v || t("None (defaults)") }), "info");
        }))),
      );
      const instruct = h("input", { type: "checkbox", checked: settings.prompt.instruct_enabled });
      instruct.addEventListener(
        "change",
        keep(async () => {
          await api("PATCH", "/settings", { prompt: { instruct_enabled: instruct.checked } });
          toast(instruct.checked ? t("Instruct mode on") : t("Instruct mode off"), "info");
        }),
      );
      parts.push(field(t("Instruct mode"), instruct, "field check"));
      TEMPLATES.forEach(([key, , label], i) => {
        const current = settings.prompt[key];
        const names = templates[i].includes(current) ? templates[i] : [...templates[i], current];
        parts.push(
          select(
            label,
            names.map((n) => [n, templates[i].includes(n) ? n : t("{n} (built in)", { n })]),
            current,
            keep(async (v) => {
              await api("PATCH", "/settings", { prompt: { [key]: v } });
              toast(`${label}: ${v}`, "info");
            }),
          ),
        );
      });
      parts.push(await textSamplers(selections.textgen_preset, settings, change, keep));
    } else {
      const presets = await list("/presets/chat");
      const bound = active && active.preset;
      parts.push(
        forAllChats(select(t("Chat preset"), [["", t("None (defaults)")], ...presets.map((n) => [n, n])], selections.chat_preset, change(async (v) => {
          await pick("chat_preset", v);
          toast(t("Chat preset for all chats: {name}", { name: v || t("None (defaults)") }), "info");
        }))),
      );
      if (bound) parts.push(h("p", { class: "muted" }, t("{name} uses its own preset, {bound}: the samplers below are its.", { name: active.name, bound })));
      parts.push(await chatSamplers(bound || selections.chat_preset, settings, change, keep, pick));
    }
    body.replaceChildren(...parts);
  }

  await render().catch((error) => alerts.show(errorText(error), { retry: () => render() }));
  return node;
}

// Number inputs for `fields` ([key, label, step]) from `values`; `changed()` is what was edited.
function numberFields(fields, values) {
  const edited = {};
  const inputs = fields.map(([key, label, step]) => {
    const input = h("input", { type: "number", step, value: values[key] ?? "" });
    input.addEventListener("input", () => {
      if (input.value === "") delete edited[key];
      else edited[key] = Number(input.value);
    });
    return field(label, input);
  });
  return { inputs, changed: () => edited };
}

// The response length and context size of the settings: what a text-completion turn uses,
// and the response length of a chat-completion turn without a preset (`withContext` false).
function lengthFields(settings, withContext = true) {
  const fields = [["amount_gen", t("Response length (tokens)"), 1]];
  if (withContext) fields.push(["max_context", t("Context size (tokens)"), 1]);
  return numberFields(fields, settings.prompt);
}

async function chatSamplers(presetName, settings, change, keep, pick) {
  const box = h("fieldset", { class: "fields samplers" });
  if (!presetName) {
    const lengths = lengthFields(settings, false);
    // alone in its row, the length's label reads on one line (a 95 px column broke it in three)
    for (const node of lengths.inputs) node.classList.add("wide");
    const name = h("input", { maxlength: 200, autocomplete: "off" });
    box.append(
      h("legend", {}, t("Samplers")),
      h("p", { class: "muted" }, t("No preset: the model's own samplers apply. Make a preset to set them.")),
      ...lengths.inputs,
      lengthsButton(lengths, keep),
      field(t("New preset's name"), name, "field wide"),
      button(
        t("New preset"),
        change(async () => {
          const made = await api("POST", "/presets/chat", { name: name.value.trim() });
          await pick("chat_preset", made.name);
          toast(t("Preset {name} made and selected", { name: made.name }), "info");
        }),
      ),
    );
    return box;
  }
  const [record, defaults] = await Promise.all([
    api("GET", `/presets/chat/${encodeURIComponent(presetName)}`),
    api("GET", "/ui/presets/chat/defaults"),
  ]);
  // a sampler the preset leaves out runs with SillyTavern's default: shown as such
  const fields = numberFields(SAMPLERS, { ...defaults.samplers, ...record.data });
  box.append(
    h("legend", {}, t("Samplers ({name})", { name: record.name })),
    ...fields.inputs,
    button(
      t("Save samplers"),
      keep(async () => {
        const edited = fields.changed();
        if (!Object.keys(edited).length) return toast(t("Nothing changed"), "info");
        // the preset as stored now, with only the edited values set (a write by another tab
        // between the read and the save is refused, not overwritten: Retry reads it again)
        const fresh = await api("GET", `/presets/chat/${encodeURIComponent(record.id)}`);
        await api("PUT", `/presets/chat/${encodeURIComponent(record.id)}`, { ...fresh.data, ...edited, name: fresh.name }, { ifMatch: fresh.revision });
        return toast(t("Saved to {name}", { name: fresh.name }), "info");
      }),
      { class: "primary" },
    ),
  );
  return box;
}

async function textSamplers(presetName, settings, change, keep) {
  const box = h("fieldset", { class: "fields samplers" });
  const lengths = lengthFields(settings);
  if (!presetName) {
    box.append(
      h("legend", {}, t("Samplers")),
      h("p", { class: "muted" }, t("No text preset: the backend's defaults apply. Pick one above, or make one under Presets.")),
      ...lengths.inputs,
      lengthsButton(lengths, keep),
    );
    return box;
  }
  const [record, defaults] = await Promise.all([
    api("GET", `/presets/textgen/${encodeURIComponent(presetName)}`),
    api("GET", "/ui/presets/textgen/defaults"),
  ]);
  const fields = numberFields(
    NUMBERS.filter(([key]) => TEXT_SAMPLERS.includes(key)),
    { ...defaults, ...record.data },
  );
  box.append(
    h("legend", {}, t("Samplers ({name})", { name: record.name })),
    ...fields.inputs,
    ...lengths.inputs,
    button(
      t("Save samplers"),
      keep(async () => {
        const edited = fields.changed();
        if (Object.keys(edited).length) {
          const fresh = await api("GET", `/presets/textgen/${encodeURIComponent(record.id)}`);
          await api("PUT", `/presets/textgen/${encodeURIComponent(record.id)}`, { ...fresh.data, ...edited, name: fresh.name }, { ifMatch: fresh.revision });
        }
        await saveLengths(lengths.changed());
        toast(t("Saved to {name}", { name: record.name }), "info");
      }),
      { class: "primary" },
    ),
  );
  return box;
}

async function saveLengths(edited) {
  if (!Object.keys(edited).length) return false;
  await api("PATCH", "/settings", { prompt: edited });
  return true;
}

const lengthsButton = (lengths, keep) =>
  button(
    t("Save lengths"),
    keep(async () => toast((await saveLengths(lengths.changed())) ? t("Lengths saved") : t("Nothing changed"), "info")),
  );
