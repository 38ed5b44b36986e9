// The account page (#/account): who is signed in, their API tokens, MCP servers, password and
// shared-connection choice. In the local mode (no accounts) there are no logins, tokens or
// passwords: the page has the MCP servers only, and says so.

import { api } from "../api.js";
import { h } from "../dom.js";
import { mcpSection } from "./mcp.js";
import { passwordSection } from "./password.js";
import { sharedSection } from "./shared.js";
import { tokensSection } from "./tokens.js";
import { t } from "../i18n.js";

export async function showAccount(view) {
  const me = await api("GET", "/auth/me");
  const local = me.via === "local";
  const head = h(
    "div",
    { class: "toolbar" },
    h("h1", {}, t("Account")),
    h(
      "span",
      { class: "muted" },
      local ? t("Local mode: one user, no sign-in.") : t("Signed in as {name}{admin}{via}.", { name: me.name, admin: me.is_admin ? t(" (admin)") : "", via: me.via === "token" ? t(" with an API token") : "" }),
    ),
    me.is_admin && !local ? h("a", { href: "#/admin" }, t("Users and shared profiles")) : "",
  );
  const mcp = await mcpSection({ canStdio: me.is_admin });
  if (local) {
    view.append(
      head,
      h("p", { class: "muted" }, t("API tokens and passwords exist when the server runs with accounts (tavernkit serve --accounts).")),
      mcp,
    );
    return;
  }
  const tokens = await tokensSection();
  view.append(head, tokens.node, mcp, passwordSection({ onChanged: tokens.refresh }), await sharedSection());
}
