// Settings > You: the name chats call you ({{user}}) when no persona speaks (what `tavernkit
// persona name` sets), and where the other choices live: personas on their screen, the
// active preset and samplers in a chat's Connection panel and under Presets.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

export async function youSection() {
  const alerts = createAlerts();
  const selections = await api("GET", "/settings/selections");
  const name = h("input", { value: selections.user_name, maxlength: 200, required: true, "aria-label": t("Your name") });
  const form = h(
    "form",
    { class: "inline-form" },
    h("label", { class: "field" }, t("Your name"), name),
    h("button", { type: "submit" }, t("Save name")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const saved = await api("PATCH", "/settings/selections", { user_name: name.value });
      name.value = saved.user_name;
      toast(t("Chats call you {user_name}", { user_name: saved.user_name }), "info");
    } catch (error) {
      alerts.show(errorText(error, { withField: true }));
    }
  });
  return h(
    "section",
    { class: "card", "aria-label": t("You") },
    h("h2", {}, t("You")),
    h("p", { class: "muted" }, t("Your name in chats where no persona speaks.")),
    form,
    alerts.node,
    h(
      "p",
      { class: "muted" },
      t("Personas: "),
      h("a", { href: "#/personas" }, t("the Personas screen")),
      t(". The active preset, samplers and templates: a chat's Connection panel, or "),
      h("a", { href: "#/presets" }, t("Presets")),
      t(". MCP servers and API tokens: "),
      h("a", { href: "#/account" }, t("your account")),
      t("."),
    ),
  );
}
