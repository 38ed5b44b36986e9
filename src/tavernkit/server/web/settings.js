// Settings (#/settings): connection profiles (keys are write-only: typed once, then shown
// only as their label and fingerprint; "Test" sends one tiny request through the profile),
// the generation settings (world info, prompt, reasoning, compatibility: PATCH /settings sends
// only what changed) and the global variables ({{getglobalvar}}); a chat's own variables are
// edited the same way.

import { api } from "./api.js";
import { reportError, toast } from "./toast.js";
import { button, h } from "./dom.js";

function profileRow(profile, refresh) {
  const result = h("span", { class: "check", role: "status" });
  return h(
    "tr",
    { dataset: { profile: profile.name } },
    h("td", {}, profile.name, profile.active ? " (active)" : ""),
    h("td", {}, `${profile.api} · ${profile.source}`),
    h("td", {}, profile.model || ""),
    h("td", {}, profile.base_url || ""),
    h("td", {}, profile.keys.join(", ")),
    h(
      "td",
      {},
      button(
        "Test",
        async () => {
          result.textContent = "testing…";
          try {
            const check = await api("POST", `/ui/profiles/${encodeURIComponent(profile.name)}/test`);
            result.textContent = check.ok ? `OK: ${check.text}` : `failed (${check.code}): ${check.message}`;
          } catch (error) {
            result.textContent = "";
            reportError(error);
          }
        },
        { "aria-label": `Test ${profile.name}` },
      ),
      button(
        "Delete",
        async () => {
          if (!window.confirm(`Delete the profile ${profile.name} and its keys?`)) return;
          try {
            await api("DELETE", `/profiles/${encodeURIComponent(profile.name)}`);
            await refresh();
          } catch (error) {
            reportError(error);
          }
        },
        { "aria-label": `Delete ${profile.name}` },
      ),
      result,
    ),
  );
}

async function profilesSection() {
  const body = h("tbody");
  const refresh = async () => {
    const profiles = await api("GET", "/profiles");
    body.replaceChildren(...profiles.map((p) => profileRow(p, refresh)));
  };
  const inputs = {
    name: h("input", { "aria-label": "Profile name", required: true }),
    source: h("input", { "aria-label": "Source", value: "openai" }),
    base_url: h("input", { "aria-label": "Base URL", placeholder: "https://…/v1" }),
    model: h("input", { "aria-label": "Model" }),
    key: h("input", { type: "password", autocomplete: "off", "aria-label": "API key" }),
    activate: h("input", { type: "checkbox", "aria-label": "Make it the active profile" }),
  };
  const form = h(
    "form",
    { class: "fields", "aria-label": "New profile" },
    ...Object.entries(inputs).map(([, input]) => h("label", { class: "field" }, input.getAttribute("aria-label"), input)),
    h("button", { type: "submit" }, "Add profile"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("POST", "/profiles", {
        name: inputs.name.value.trim(),
        source: inputs.source.value.trim() || "openai",
        base_url: inputs.base_url.value.trim() || null,
        model: inputs.model.value.trim() || null,
        keys: inputs.key.value ? [inputs.key.value] : [],
        activate: inputs.activate.checked,
      });
      inputs.key.value = ""; // a key never stays in the page once sent
      toast("Profile added", "info");
      await refresh();
    } catch (error) {
      reportError(error);
    }
  });
  await refresh();
  return h(
    "section",
    { class: "card", "aria-label": "Connection profiles" },
    h("h2", {}, "Connection profiles"),
    h(
      "table",
      { class: "blocks" },
      h("thead", {}, h("tr", {}, ["Name", "API", "Model", "URL", "Keys", ""].map((t) => h("th", {}, t)))),
      body,
    ),
    form,
  );
}

// An editor of a variables map at `path` (GET the map, PUT/DELETE one name).
export async function variablesSection(path, title) {
  const list = h("tbody");
  const refresh = async () => {
    const vars = await api("GET", path);
    list.replaceChildren(
      ...Object.entries(vars).map(([name, value]) =>
        h(
          "tr",
          {},
          h("td", {}, name),
          h("td", {}, h("code", {}, JSON.stringify(value))),
          h(
            "td",
            {},
            button(
              "Delete",
              async () => {
                try {
                  await api("DELETE", `${path}/${encodeURIComponent(name)}`);
                  await refresh();
                } catch (error) {
                  reportError(error);
                }
              },
              { "aria-label": `Delete variable ${name}` },
            ),
          ),
        ),
      ),
    );
  };
  const name = h("input", { "aria-label": "Variable name" });
  const value = h("input", { "aria-label": "Variable value" });
  const set = button("Set", async () => {
    let parsed = value.value;
    try {
      parsed = JSON.parse(value.value);
    } catch {
      /* not JSON: kept as the text it is */
    }
    try {
      await api("PUT", `${path}/${encodeURIComponent(name.value.trim())}`, { value: parsed });
      name.value = value.value = "";
      await refresh();
    } catch (error) {
      reportError(error);
    }
  });
  await refresh();
  return h(
    "section",
    { class: "card", "aria-label": title },
    h("h2", {}, title),
    h("table", { class: "blocks" }, list),
    h("div", { class: "row" }, name, value, set),
  );
}

// The keys the generation settings screen edits: [section, key, label, kind]; a number's
// range is the server's to check (its error names the field).
const GENERATION_FIELDS = [
  ["world_info", "depth", "Scan depth (messages)", "number"],
  ["world_info", "budget", "Budget (% of context)", "number"],
  ["world_info", "budget_cap", "Budget cap (tokens, 0: none)", "number"],
  ["world_info", "min_activations", "Min activations", "number"],
  ["world_info", "max_recursion_steps", "Max recursion steps (0: no limit)", "number"],
  ["world_info", "recursive", "Recursive scan", "checkbox"],
  ["world_info", "include_names", "Include names", "checkbox"],
  ["world_info", "case_sensitive", "Case-sensitive keys", "checkbox"],
  ["world_info", "match_whole_words", "Match whole words", "checkbox"],
  ["prompt", "max_context", "Context size (tokens)", "number"],
  ["prompt", "amount_gen", "Response length (tokens)", "number"],
  ["prompt", "instruct_enabled", "Instruct mode (text completion)", "checkbox"],
  ["reasoning", "auto_parse", "Parse reasoning from the reply", "checkbox"],
  ["reasoning", "add_to_prompts", "Send earlier reasoning back", "checkbox"],
  ["reasoning", "template", "Reasoning template", "text"],
];

function fieldValue(input, kind) {
  if (kind === "checkbox") return input.checked;
  if (kind === "number") return input.value === "" ? null : Number(input.value);
  return input.value;
}

async function generationSection() {
  const form = h("form", { "aria-label": "Generation settings" });
  let submit = async () => {};
  const render = async () => {
    const [current, books] = await Promise.all([
      api("GET", "/settings"),
      api("GET", "/lorebooks?limit=500"),
    ]);
    const inputs = GENERATION_FIELDS.map(([section, key, label, kind]) => {
      const value = current[section][key];
      const input = h("input", {
        type: kind,
        "aria-label": label,
        dataset: { section, key },
        value: kind === "checkbox" ? undefined : String(value),
        checked: kind === "checkbox" ? Boolean(value) : undefined,
        step: kind === "number" ? "1" : undefined,
      });
      return { section, key, kind, input, before: value };
    });
    const global = new Set(current.world_info.global_books);
    const bookBoxes = books.items.map((book) => ({
      name: book.name,
      input: h("input", { type: "checkbox", "aria-label": `Global lorebook ${book.name}`, checked: global.has(book.name) }),
    }));
    const compat = h(
      "select",
      { "aria-label": "Compatibility" },
      h("option", { value: "default", selected: current.compat === "default" }, "Fix them (default)"),
      h("option", { value: "st-1.18", selected: current.compat === "st-1.18" }, "Reproduce them (st-1.18)"),
    );
    const group = (section, title) =>
      h(
        "fieldset",
        { class: "fields" },
        h("legend", {}, title),
        ...inputs
          .filter((f) => f.section === section)
          .map((f) => {
            const label = f.input.getAttribute("aria-label");
            return f.kind === "checkbox"
              ? h("label", { class: "field check" }, f.input, label)
              : h("label", { class: "field" }, label, f.input);
          }),
      );
    const save = h("button", { type: "submit" }, "Save settings");
    form.replaceChildren(
      group("world_info", "World info"),
      h(
        "fieldset",
        { class: "fields", "aria-label": "Global lorebooks" },
        h("legend", {}, "Global lorebooks (active in every chat)"),
        ...(bookBoxes.length
          ? bookBoxes.map((b) => h("label", { class: "field check" }, b.input, b.name))
          : [h("span", { class: "muted" }, "No lorebooks yet: import one or make one under Lorebooks.")]),
      ),
      group("prompt", "Prompt"),
      group("reasoning", "Reasoning"),
      h("fieldset", { class: "fields" }, h("legend", {}, "Compatibility"), h("label", { class: "field" }, "Known SillyTavern bugs", compat)),
      save,
    );
    submit = async () => {
      const change = {};
      for (const f of inputs) {
        const value = fieldValue(f.input, f.kind);
        if (value !== f.before) (change[f.section] ??= {})[f.key] = value;
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
        toast("Nothing changed", "info");
        return;
      }
      await api("PATCH", "/settings", change);
      toast("Settings saved", "info");
      await render();
    };
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await submit();
    } catch (error) {
      reportError(error); // the server names the field; nothing was stored
    }
  });
  await render();
  return h("section", { class: "card", "aria-label": "Generation" }, h("h2", {}, "Generation"), form);
}

export async function showSettings(view) {
  view.append(
    h("h1", {}, "Settings"),
    await profilesSection(),
    await generationSection(),
    await variablesSection("/variables", "Global variables"),
  );
}
