// The sign-in page (servers with accounts on): name + password, then back to the grid.

import { api, setCsrf } from "./api.js";
import { reportError } from "./toast.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

export async function showLogin(view) {
  const name = h("input", { name: "name", autocomplete: "username", required: true });
  const password = h("input", {
    name: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const form = h(
    "form",
    { class: "card login", "aria-label": t("Sign in") },
    h("h1", {}, t("Sign in")),
    h("label", {}, t("Name"), name),
    h("label", {}, t("Password"), password),
    h("button", { type: "submit" }, t("Sign in")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const me = await api("POST", "/auth/login", { name: name.value, password: password.value });
      setCsrf(me.csrf_token);
      window.location.hash = "#/";
    } catch (error) {
      reportError(error);
    }
  });
  view.append(form);
  name.focus();
}
