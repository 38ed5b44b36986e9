// Account > API tokens: the caller's tokens (name, created, last used), a new one shown once
// (with Copy, until the user says Done: it is never shown again), and revoking one (programs
// using it are refused from then on).

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "never");

export async function tokensSection() {
  const alerts = createAlerts();
  const body = h("tbody");
  const fresh = h("div");

  const refresh = async () => {
    const tokens = await api("GET", "/auth/tokens");
    body.replaceChildren(
      ...(tokens.length
        ? tokens.map((token) => {
            const label = token.label || "(no name)";
            return h(
              "tr",
              { dataset: { token: token.id } },
              h("td", { "data-label": "Name" }, label),
              h("td", { "data-label": "Created" }, when(token.created)),
              h("td", { "data-label": "Last used" }, when(token.last_used)),
              h(
                "td",
                {},
                button(
                  "Revoke",
                  async () => {
                    if (!window.confirm(`Revoke the token ${label}? Programs using it stop working.`)) return;
                    try {
                      await api("DELETE", `/auth/tokens/${encodeURIComponent(token.id)}`);
                      toast(`Token ${label} revoked`, "info");
                      await refresh();
                    } catch (error) {
                      alerts.show(errorText(error, { withField: true }));
                    }
                  },
                  { "aria-label": `Revoke ${label}`, class: "danger" },
                ),
              ),
            );
          })
        : [h("tr", {}, h("td", { colspan: "4", class: "muted" }, "No API tokens."))]),
    );
  };

  // the token just made: in view (selectable, with Copy) until Done
  function showToken(issued) {
    const value = h("input", { readonly: true, value: issued.token, class: "token-value", "aria-label": "New token" });
    const copy = button("Copy", async () => {
      try {
        await navigator.clipboard.writeText(issued.token);
        toast("Token copied", "info");
      } catch {
        value.select(); // no clipboard here: selected for the user to copy
        toast("Press Ctrl+C (or ⌘C) to copy the selected token", "info");
      }
    });
    fresh.replaceChildren(
      h(
        "div",
        { class: "new-token", role: "status" },
        h("p", {}, h("strong", {}, `Your new token ${issued.label || ""}`.trim()), ": copy it now. You will not see it again."),
        h("div", { class: "row" }, value, copy, button("Done", () => fresh.replaceChildren())),
        h("p", { class: "muted" }, "Send it as the header Authorization: Bearer <token>."),
      ),
    );
    value.focus();
    value.select();
  }

  const label = h("input", { maxlength: 200, placeholder: "e.g. my script" });
  const form = h(
    "form",
    { class: "inline-form", "aria-label": "New API token" },
    h("label", { class: "field" }, "Token name", label),
    h("button", { type: "submit" }, "Create token"),
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
    { class: "card", "aria-label": "API tokens" },
    h("h2", {}, "API tokens"),
    h("p", { class: "muted" }, "For programs that use the API as you (the OpenAI-compatible /v1 too)."),
    alerts.node,
    fresh,
    h(
      "table",
      { class: "records" },
      h("thead", {}, h("tr", {}, ["Name", "Created", "Last used", ""].map((t) => h("th", {}, t)))),
      body,
    ),
    form,
  );
  return { node, refresh };
}
