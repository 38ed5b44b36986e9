// Account > Shared route: whether a turn whose own keys all failed may fall back to the
// server's shared connection (the admin's policy may still withhold it). Saved when changed.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

export async function sharedSection() {
  const alerts = createAlerts();
  const current = await api("GET", "/auth/me/shared-fallback");
  const box = h("input", { type: "checkbox", checked: current.allowed });
  const label = t("Fall back to the server's shared connection when my keys fail");
  box.addEventListener("change", async () => {
    try {
      const saved = await api("PUT", "/auth/me/shared-fallback", { allowed: box.checked });
      box.checked = saved.allowed;
      toast(saved.allowed ? t("Shared fallback on") : t("Shared fallback off"), "info");
    } catch (error) {
      box.checked = !box.checked;
      alerts.show(errorText(error, { withField: true }));
    }
  });
  return h(
    "section",
    { class: "card", "aria-label": t("Shared connection") },
    h("h2", {}, t("Shared connection")),
    h("label", { class: "field check" }, box, label),
    alerts.node,
  );
}
