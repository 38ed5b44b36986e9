// The regex scripts (#/regex): SillyTavern's Regex extension. The global list in run order
// (move up and down, turn on and off, export, delete, open in the editor), the switch for
// every script, new scripts and imported files (SillyTavern's export files), and a
// character's own scripts, which run only once allowed.

import { api } from "../api.js";
import { createAlerts } from "../alerts.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { summary } from "./editor.js";
import { t } from "../i18n.js";

async function allCharacters() {
  const found = [];
  for (;;) {
    const page = await api("GET", `/characters?offset=${found.length}&limit=200`);
    found.push(...page.items);
    if (!page.items.length || found.length >= page.total) return found;
  }
}

function exportLink(script) {
  return h(
    "a",
    { class: "button", href: `/regex/scripts/${encodeURIComponent(script.id)}/export`, download: "" },
    t("Export"),
  );
}

export async function showRegex(view) {
  const alerts = createAlerts();
  let state = await api("GET", "/regex");
  const list = h("ol", { class: "regex-list", "aria-label": t("Regex scripts") });
  const enabled = h("input", { type: "checkbox" });

  async function act(what, run) {
    try {
      await run();
      await refresh();
      if (what) toast(what, "info");
    } catch (error) {
      alerts.show(errorText(error));
    }
  }

  function row(script, index) {
    const path = `/regex/scripts/${encodeURIComponent(script.id)}`;
    const on = !script.disabled;
    const name = h("a", { href: `#/regex/${encodeURIComponent(script.id)}`, class: "regex-name" }, script.scriptName || t("(no name)"));
    return h(
      "li",
      { class: `regex-script card${on ? "" : " off"}`, dataset: { id: script.id } },
      h("div", { class: "row" }, name, h("span", { class: "muted" }, on ? "" : "off")),
      h("code", { class: "regex-find" }, String(script.findRegex ?? "")),
      h("span", { class: "muted" }, summary(script)),
      h(
        "div",
        { class: "row regex-actions" },
        button(t("Up"), () => act("", () => api("PUT", `${path}/position`, { position: index - 1 })), { disabled: index === 0 }),
        button(t("Down"), () => act("", () => api("PUT", `${path}/position`, { position: index + 1 })), {
          disabled: index === state.scripts.length - 1,
        }),
        button(on ? t("Turn off") : t("Turn on"), () => act(on ? t("{name} is off", { name: script.scriptName }) : t("{name} is on", { name: script.scriptName }), () => api("PUT", `${path}/enabled`, { enabled: !on }))),
        exportLink(script),
        button(
          t("Delete"),
          () => {
            if (window.confirm(t("Delete the regex script {scriptName}?", { scriptName: script.scriptName }))) act(t("Deleted {scriptName}", { scriptName: script.scriptName }), () => api("DELETE", path));
          },
          { class: "danger" },
        ),
      ),
    );
  }

  function render() {
    enabled.checked = state.enabled;
    list.replaceChildren(
      ...(state.scripts.length ? state.scripts.map(row) : [h("li", { class: "muted" }, t("No regex scripts yet: add or import one."))]),
    );
  }

  async function refresh() {
    try {
      state = await api("GET", "/regex");
      render();
    } catch (error) {
      alerts.show(errorText(error), { retry: refresh });
    }
  }

  enabled.addEventListener("change", () =>
    act(enabled.checked ? t("Regex scripts are on") : t("Regex scripts are off"), () => api("PUT", "/regex/enabled", { enabled: enabled.checked })),
  );

  const files = h("input", { type: "file", accept: ".json,application/json", multiple: true, class: "visually-hidden" });
  files.addEventListener("change", async () => {
    for (const file of [...files.files]) {
      try {
        const body = JSON.parse(await file.text());
        const done = await api("POST", "/regex/import", body);
        toast(t("Imported {names}", { names: done.map((s) => s.scriptName).join(", ") }), "info");
      } catch (error) {
        alerts.show(t("{name}: {message}", { name: file.name, message: error instanceof SyntaxError ? t("not JSON") : errorText(error) }));
      }
    }
    files.value = "";
    await refresh();
  });

  render();
  view.append(
    h("div", { class: "toolbar" }, h("h1", {}, t("Regex scripts"))),
    h(
      "div",
      { class: "book-tools" },
      h("label", { class: "check" }, enabled, t("Regex scripts on")),
      button(t("New script"), () => (window.location.hash = "#/regex/new"), { class: "primary" }),
      h("label", { class: "button file-button" }, t("Import scripts"), files),
      h("a", { class: "button", href: "/regex/export", download: "regex-scripts.json" }, t("Export all")),
    ),
    h("p", { class: "muted" }, t("Global scripts run in this order on every chat, before a preset's and a character's own.")),
    alerts.node,
    list,
    await characterSection(alerts),
  );
}

// A character's embedded scripts: listed, and off until allowed (SillyTavern asks when such a
// card is opened; here the user allows them by name).
async function characterSection(alerts) {
  const pick = h("select", {}, h("option", { value: "" }, t("Choose a character")));
  for (const character of await allCharacters()) pick.append(h("option", { value: character.id }, character.name));
  const body = h("div", { class: "regex-card" });

  async function show() {
    body.replaceChildren();
    if (!pick.value) return;
    try {
      const found = await api("GET", `/regex/characters/${encodeURIComponent(pick.value)}`);
      if (!found.scripts.length) {
        body.append(h("p", { class: "muted" }, t("{name} has no regex scripts of its own.", { name: found.name })));
        return;
      }
      const toggle = async () => {
        try {
          await api("PUT", `/regex/characters/${encodeURIComponent(found.character_id)}/allowed`, { allowed: !found.allowed });
          toast(found.allowed ? t("{name}'s scripts are stopped", { name: found.name }) : t("{name}'s scripts run now", { name: found.name }), "info");
          await show();
        } catch (error) {
          alerts.show(errorText(error));
        }
      };
      body.append(
        h(
          "ol",
          { class: "regex-list", "aria-label": t("{name}'s scripts", { name: found.name }) },
          ...found.scripts.map((script) =>
            h("li", { class: "regex-script card" }, h("strong", {}, script.scriptName), h("code", { class: "regex-find" }, String(script.findRegex ?? "")), h("span", { class: "muted" }, summary(script))),
          ),
        ),
        h("p", {}, found.allowed ? t("These scripts run in this character's chats.") : found.question),
        button(found.allowed ? t("Stop its scripts") : t("Allow its scripts"), toggle, { class: found.allowed ? "" : "primary" }),
      );
    } catch (error) {
      alerts.show(errorText(error));
    }
  }

  pick.addEventListener("change", show);
  return h("section", { class: "regex-characters" }, h("h2", {}, t("A character's own scripts")), h("label", { class: "field" }, t("Character"), pick), body);
}
