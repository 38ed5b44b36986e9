// A variables editor: the global variables ({{getglobalvar}}) on the settings screen and a
// chat's own ({{getvar}}) in the chat's side panel. Values are JSON when they parse as JSON,
// else the text typed.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { reportError } from "../toast.js";
import { t } from "../i18n.js";

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
              t("Delete"),
              async () => {
                try {
                  await api("DELETE", `${path}/${encodeURIComponent(name)}`);
                  await refresh();
                } catch (error) {
                  reportError(error);
                }
              },
              { "aria-label": t("Delete variable {name}", { name }) },
            ),
          ),
        ),
      ),
    );
  };
  const name = h("input", { autocomplete: "off" });
  const value = h("input", { autocomplete: "off" });
  const set = button(t("Set"), async () => {
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
    h("table", { class: "records" }, list),
    h(
      "div",
      { class: "row variable-add" },
      h("label", { class: "field" }, t("Variable name"), name),
      h("label", { class: "field" }, t("Variable value"), value),
      set,
    ),
  );
}
