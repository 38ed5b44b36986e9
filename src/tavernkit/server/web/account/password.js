// Account > Password: change it (the current one required). Every other session and every
// API token of the account is signed out; this page stays signed in.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText } from "../toast.js";
import { t } from "../i18n.js";

export const MIN_PASSWORD = 10; // the server's rule (server/accounts.py); the server checks it

export function passwordSection({ onChanged = async () => {} } = {}) {
  const alerts = createAlerts();
  const input = (autocomplete) => h("input", { type: "password", autocomplete, required: true, maxlength: 1024 });
  const old = input("current-password");
  const next = input("new-password");
  const again = input("new-password");
  next.setAttribute("minlength", String(MIN_PASSWORD));
  const form = h(
    "form",
    { class: "fields", "aria-label": t("Change password") },
    h("label", { class: "field" }, t("Current password"), old),
    h("label", { class: "field" }, t("New password"), next),
    h("label", { class: "field" }, t("New password again"), again),
    h("div", { class: "row" }, h("button", { type: "submit" }, t("Change password"))),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (next.value !== again.value) {
      alerts.show(t("The two new passwords differ: type the same one twice."));
      return;
    }
    try {
      await api("POST", "/auth/password", { old_password: old.value, new_password: next.value });
      alerts.show(t("Password changed. Your other sessions and your API tokens were signed out."), { info: true });
      await onChanged();
    } catch (error) {
      alerts.show(errorText(error, { withField: true })); // nothing changed
    } finally {
      old.value = next.value = again.value = "";
    }
  });
  return h(
    "section",
    { class: "card", "aria-label": t("Password") },
    h("h2", {}, t("Password")),
    h("p", { class: "muted" }, t("{MIN_PASSWORD} characters or more, and not a common password. Changing it signs out your other sessions and revokes your API tokens.", { MIN_PASSWORD })),
    alerts.node,
    form,
  );
}
