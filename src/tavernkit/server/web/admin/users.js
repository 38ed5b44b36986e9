// Admin > Users: every user (name, admin, created), a new one with a password, a user's
// password reset (which signs them out everywhere) and deleting a user (after a confirm):
// their characters, chats, keys and the rest are deleted with them or handed to another user
// (the server refuses a hand-over whose names clash, and changes nothing). An admin cannot
// delete themselves.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { MIN_PASSWORD } from "../account/password.js";
import { when } from "../account/tokens.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

export async function usersSection(me) {
  const alerts = createAlerts();
  const body = h("tbody");

  const refresh = async () => {
    const users = await api("GET", "/users");
    body.replaceChildren(...users.map((user) => row(user, users)));
  };

  function row(user, users) {
    const self = user.id === me.user_id;
    const slot = h("div", { class: "reset" });
    const resetForm = () => {
      const input = h("input", { type: "password", autocomplete: "new-password", minlength: String(MIN_PASSWORD), required: true });
      const label = t("New password for {name}", { name: user.name });
      input.setAttribute("aria-label", label);
      const form = h(
        "form",
        { class: "inline-form", "aria-label": t("Reset the password of {name}", { name: user.name }) },
        h("label", { class: "field" }, label, input),
        h("button", { type: "submit" }, t("Save password")),
        button(t("Cancel"), () => slot.replaceChildren()),
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        try {
          await api("POST", `/users/${encodeURIComponent(user.id)}/password`, { password: input.value });
          slot.replaceChildren();
          alerts.show(self ? t("{name}'s password is set. Your other sessions and tokens were signed out.", { name: user.name }) : t("{name}'s password is set. Their sessions and API tokens were signed out.", { name: user.name }), { info: true });
        } catch (error) {
          alerts.show(errorText(error, { withField: true }));
        } finally {
          input.value = "";
        }
      });
      slot.replaceChildren(form);
      input.focus();
    };
    const deleteForm = () => {
      const choice = h(
        "select",
        { "aria-label": t("Records of {name}", { name: user.name }) },
        h("option", { value: "" }, t("Delete them")),
        ...users.filter((u) => u.id !== user.id).map((u) => h("option", { value: u.id }, t("Hand them to {name}", { name: u.name }))),
      );
      const form = h(
        "form",
        { class: "inline-form", "aria-label": t("Delete the user {name}", { name: user.name }) },
        h("label", { class: "field" }, t("Their characters, chats, keys and settings"), choice),
        h("button", { type: "submit", class: "danger", "aria-label": t("Confirm deleting {name}", { name: user.name }) }, t("Delete the user")),
        button(t("Cancel"), () => slot.replaceChildren()),
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const to = users.find((u) => u.id === choice.value);
        const fate = to ? t("their records go to {name}", { name: to.name }) : t("their records are deleted with them");
        if (!window.confirm(t("Delete the user {name}? They can no longer sign in; their tokens and sessions end, and {fate}.", { name: user.name, fate }))) return;
        try {
          const query = to ? `?hand_over_to=${encodeURIComponent(to.id)}` : "";
          await api("DELETE", `/users/${encodeURIComponent(user.id)}${query}`);
          toast(to ? t("{name} deleted; {name2} has their records", { name: user.name, name2: to.name }) : t("{name} deleted", { name: user.name }), "info");
          await refresh();
        } catch (error) {
          alerts.show(errorText(error, { withField: true }));
        }
      });
      slot.replaceChildren(form);
      choice.focus();
    };
    return h(
      "tr",
      { dataset: { user: user.name } },
      h("td", { "data-label": t("Name") }, user.name, self ? t(" (you)") : ""),
      h("td", { "data-label": t("Role") }, user.is_admin ? t("admin") : t("user")),
      h("td", { "data-label": t("Created") }, when(user.created)),
      h(
        "td",
        {},
        h("div", { class: "actions" }, button(t("Reset password"), resetForm, { "aria-label": t("Reset password of {name}", { name: user.name }) }),
        self ? "" : button(t("Delete"), deleteForm, { "aria-label": t("Delete {name}", { name: user.name }), class: "danger" }),
        ),
        slot,
      ),
    );
  }

  const name = h("input", { required: true, maxlength: 200, autocomplete: "off" });
  const password = h("input", { type: "password", autocomplete: "new-password", minlength: String(MIN_PASSWORD), required: true });
  const admin = h("input", { type: "checkbox" });
  const form = h(
    "form",
    { class: "fields", "aria-label": t("New user") },
    h("label", { class: "field" }, t("User name"), name),
    h("label", { class: "field" }, t("Password"), password),
    h("label", { class: "field check" }, admin, t("Administrator")),
    h("div", { class: "row" }, h("button", { type: "submit" }, t("Create user"))),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api("POST", "/users", { name: name.value.trim(), password: password.value, is_admin: admin.checked });
      toast(t("User {name} created", { name: made.name }), "info");
      form.reset();
      await refresh();
    } catch (error) {
      alerts.show(errorText(error, { withField: true }));
    } finally {
      password.value = "";
    }
  });

  await refresh();
  return h(
    "section",
    { class: "card", "aria-label": t("Users") },
    h("h2", {}, t("Users")),
    alerts.node,
    h(
      "table",
      { class: "records" },
      h("thead", {}, h("tr", {}, [t("Name"), t("Role"), t("Created"), ""].map((t) => h("th", {}, t)))),
      body,
    ),
    h("h3", {}, t("New user")),
    h("p", { class: "muted" }, t("A password needs {MIN_PASSWORD} characters or more and cannot be a common one. A name cannot hold invisible characters. Each user has their own characters, chats and keys.", { MIN_PASSWORD })),
    form,
  );
}
