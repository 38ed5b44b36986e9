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
      const label = `New password for ${user.name}`;
      input.setAttribute("aria-label", label);
      const form = h(
        "form",
        { class: "inline-form", "aria-label": `Reset the password of ${user.name}` },
        h("label", { class: "field" }, label, input),
        h("button", { type: "submit" }, "Save password"),
        button("Cancel", () => slot.replaceChildren()),
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        try {
          await api("POST", `/users/${encodeURIComponent(user.id)}/password`, { password: input.value });
          slot.replaceChildren();
          alerts.show(`${user.name}'s password is set. ${self ? "Your other sessions and tokens were" : "Their sessions and API tokens were"} signed out.`, { info: true });
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
        { "aria-label": `Records of ${user.name}` },
        h("option", { value: "" }, "Delete them"),
        ...users.filter((u) => u.id !== user.id).map((u) => h("option", { value: u.id }, `Hand them to ${u.name}`)),
      );
      const form = h(
        "form",
        { class: "inline-form", "aria-label": `Delete the user ${user.name}` },
        h("label", { class: "field" }, "Their characters, chats, keys and settings", choice),
        h("button", { type: "submit", class: "danger", "aria-label": `Confirm deleting ${user.name}` }, "Delete the user"),
        button("Cancel", () => slot.replaceChildren()),
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const to = users.find((u) => u.id === choice.value);
        const fate = to ? `their records go to ${to.name}` : "their records are deleted with them";
        if (!window.confirm(`Delete the user ${user.name}? They can no longer sign in; their tokens and sessions end, and ${fate}.`)) return;
        try {
          const query = to ? `?hand_over_to=${encodeURIComponent(to.id)}` : "";
          await api("DELETE", `/users/${encodeURIComponent(user.id)}${query}`);
          toast(to ? `${user.name} deleted; ${to.name} has their records` : `${user.name} deleted`, "info");
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
      h("td", { "data-label": "Name" }, user.name, self ? " (you)" : ""),
      h("td", { "data-label": "Role" }, user.is_admin ? "admin" : "user"),
      h("td", { "data-label": "Created" }, when(user.created)),
      h(
        "td",
        {},
        h("div", { class: "actions" }, button("Reset password", resetForm, { "aria-label": `Reset password of ${user.name}` }),
        self ? "" : button("Delete", deleteForm, { "aria-label": `Delete ${user.name}`, class: "danger" }),
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
    { class: "fields", "aria-label": "New user" },
    h("label", { class: "field" }, "User name", name),
    h("label", { class: "field" }, "Password", password),
    h("label", { class: "field check" }, admin, "Administrator"),
    h("div", { class: "row" }, h("button", { type: "submit" }, "Create user")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api("POST", "/users", { name: name.value.trim(), password: password.value, is_admin: admin.checked });
      toast(`User ${made.name} created`, "info");
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
    { class: "card", "aria-label": "Users" },
    h("h2", {}, "Users"),
    alerts.node,
    h(
      "table",
      { class: "records" },
      h("thead", {}, h("tr", {}, ["Name", "Role", "Created", ""].map((t) => h("th", {}, t)))),
      body,
    ),
    h("h3", {}, "New user"),
    h("p", { class: "muted" }, `A password needs ${MIN_PASSWORD} characters or more and cannot be a common one. A name cannot hold invisible characters. Each user has their own characters, chats and keys.`),
    form,
  );
}
