// The admin page (#/admin, admins of a server with accounts): the users and the server's
// shared connection profiles (the same profiles component as Settings, on /shared/profiles).

import { api } from "../api.js";
import { h } from "../dom.js";
import { profilesSection } from "../settings/profiles.js";
import { usersSection } from "./users.js";
import { t } from "../i18n.js";

export async function showAdmin(view) {
  const me = await api("GET", "/auth/me");
  view.append(h("h1", {}, t("Admin")));
  if (me.via === "local") {
    view.append(h("p", { class: "muted" }, t("Local mode: one user, nothing to administer. Run the server with accounts (tavernkit serve --accounts) for users and shared profiles.")));
    return;
  }
  if (!me.is_admin) {
    view.append(h("p", { role: "alert" }, t("Only an admin can see this page.")));
    return;
  }
  view.append(await usersSection(me), await profilesSection({ shared: true }));
}
