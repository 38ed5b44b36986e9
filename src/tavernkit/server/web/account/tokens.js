// Account > API tokens: the caller's tokens (name, created, last used), a new one shown once
// (with Copy, until the user says Done: it is never shown again), and revoking one (programs
// using it are refused from then on).

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : t("never"));

export async function tokensSection() {
  const alerts = createAlerts();
  const body = h("tbody");
  const fresh = h("div");

  const refresh = async () => {
    const tokens = await api("GET", "/auth/tokens");
    body.replaceChildren(
      ...(tokens.length
        ? tokens.map((token) => {
            const label = token.label || t("(no name)");
            return h(
              "tr",
              { dataset: { token: token.id } },
              h("td", { "data-label": t("Name") }, label),
              h("td", { "data-label": t("Created") }, when(token.created)),
              h("td", { "data-label": t("Last used") }, when(token.last_used)),
              h(
                "td",
                {},
                button(
                  t("Revoke"),
                  async () => {
                    if (!window.confirm(t("Revoke the token {label}? Programs using it stop working.", { label }))) return;
                    try {
                      await api("DELETE", `/auth/tokens/${encodeURIComponent(token.id)}`);
                      toast(t("Token {label} revoked", { label }), "info");
                      await refresh();
                    } catch (error) {
                      alerts.show(errorText(error, { withField: true }));
                    }
                  },
                  { "aria-label": t("Revoke {label}", { label }), class: "danger" },
                ),
              ),
            );
          })
        : [h("tr", {}, h("td", { colspan: "4", class: "muted" }, t("No API tokens.")))]),
    );
  };

  // the token just made: in view (selectable, with Copy) until Done
  function showToken(issued) {
    const value = h("input", { readonly: true, value: issued.token, class: "token-value", "aria-label": t("New token") });
    const copy = button(t("Copy"), async () => {
      try {
        await navigator.clipboard.writeText(issued.token);
        toast(t("Token copied"), "info");
      } catch {
        value.select(); // no clipboard here: selected for the user to copy
        toast(t("Press Ctrl+C (or ⌘C) to copy the selected token"), "info");
      }
    });
    fresh.replaceChildren(
      h(
        "div",
        { class: "new-token", role: "status" },
        h("p", {}, h("strong", {}, (issued.label ? t("Your new token {label}", { label: issued.label }) : t("Your new token"))), t(": copy it now. You will not see it again.")),
        h("div", { class: "row" }, value, copy, button(t("Done"), () => fresh.replaceChildren())),
        h("p", { class: "muted" }, t("Send it as the header Authorization: Bearer <token>.")),
      ),
    );
    value.focus();
    value.select();
  }

  const label = h("input", { maxlength: 200, placeholder: t("e.g. my script") });
  const form = h(
    "form",
    { class: "inline-form", "aria-label": t("New API token") },
    h("label", { class: "field" }, t("Token name"), label),
    h("button", { type: "submit" }, t("Create token")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const issued = await api("POST", "/auth/tokens", { label: label.value.trim() });
      label.value = "";
      showToken(issued);
      await refresh();
    } catch (error) {
      alerts.show(errorText(error, { withField: true }));
    }
  });

  await refresh();
  const node = h(
    "section",
    { class: "card", "aria-label": t("API tokens") },
    h("h2", {}, t("API tokens")),
    h("p", { class: "muted" }, t("For programs that use the API as you (the OpenAI-compatible /v1 too).")),
    alerts.node,
    fresh,
    h(
      "table",
      { class: "records" },
      h("thead", {}, h("tr", {}, [t("Name"), t("Created"), t("Last used"), ""].map((t) => h("th", {}, t)))),
      body,
    ),
    form,
  );
  return { node, refresh };
}
