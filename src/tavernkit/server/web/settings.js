// Settings (#/settings): connection profiles (keys are write-only: typed once, then shown
// only as their label and fingerprint; "Test" sends one tiny request through the profile) and
// the global variables ({{getglobalvar}}); a chat's own variables are edited the same way.

import { api } from "./api.js";
import { reportError, toast } from "./app.js";
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

export async function showSettings(view) {
  view.append(
    h("h1", {}, "Settings"),
    await profilesSection(),
    await variablesSection("/variables", "Global variables"),
  );
}
