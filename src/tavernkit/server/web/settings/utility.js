// Settings > Utility model: the connection profile side tasks run on (summaries, an inherited
// response review, and generate_task calls that ask for it), so they spend neither the main
// model's keys nor its budget. "Same as chat" runs them on the chat's model, as before. Saved
// when chosen (PATCH /settings/selections utility_profile); a profile no longer stored stays
// shown as "(not stored)": side tasks are then refused by name until another is chosen.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { t } from "../i18n.js";
import { errorText, toast } from "../toast.js";

export async function utilitySection() {
  const alerts = createAlerts();
  const select = h("select", { "aria-label": t("Utility model") });
  let current = null;

  // the options: the profiles as they are now (one may have been added or deleted above since
  // this section was shown), and the chosen one even when it is no longer stored
  function options(names) {
    const wanted = ["", ...names, ...(current && !names.includes(current) ? [current] : [])];
    if ([...select.options].map((o) => o.value).join("\n") === wanted.join("\n")) return;
    select.replaceChildren(
      ...wanted.map((n) => h("option", { value: n }, n === "" ? t("Same as chat") : names.includes(n) ? n : t("{name} (not stored)", { name: n }))),
    );
    select.value = current || "";
  }
  const names = async () => (await api("GET", "/profiles")).map((p) => p.name);

  select.addEventListener("focus", () => names().then(options, (error) => alerts.show(errorText(error))));
  select.addEventListener("change", async () => {
    const chosen = select.value || null;
    try {
      const saved = await api("PATCH", "/settings/selections", { utility_profile: chosen });
      current = saved.utility_profile;
      toast(current ? t("Side tasks use {name}", { name: current }) : t("Side tasks use the chat's model"), "info");
    } catch (error) {
      select.value = current || "";
      alerts.show(errorText(error, { withField: true }));
    }
  });
  const [profiles, selections] = await Promise.all([names(), api("GET", "/settings/selections")]);
  current = selections.utility_profile;
  options(profiles);
  return h(
    "section",
    { class: "card utility-box", "aria-label": t("Side tasks") },
    h("h2", {}, t("Side tasks")),
    h(
      "p",
      { class: "muted" },
      t("Summaries, response review and other side tasks run on this profile, so they never spend the main model's keys or budget. A character's own model is set in its editor (Writer)."),
    ),
    h("label", { class: "field" }, t("Utility model"), select),
    alerts.node,
  );
}
