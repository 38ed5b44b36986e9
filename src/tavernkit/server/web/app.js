// The UI's shell: hash routes (#/, #/chat/<id>[/<message>], #/inspect/<id>[?persona=],
// #/login...), the theme and sign-in when the server has accounts. Each screen is its own
// module (the chat screen a folder of components); nothing imports this file.

import { showAccount } from "./account/screen.js";
import { createAlerts } from "./alerts.js";
import { showAdmin } from "./admin/screen.js";
import { api, ApiError, setCsrf } from "./api.js";
import { showCharacters } from "./characters.js";
import { showCharacter } from "./character/screen.js";
import { h } from "./dom.js";
import { showChat } from "./chat/screen.js";
import { showGroup } from "./groups/editor.js";
import { showGroups } from "./groups/list.js";
import { t } from "./i18n.js"; // first: the catalogue loads before any screen draws
import { showInspector } from "./inspector.js";
import { showLogin } from "./login.js";
import { showLorebook } from "./lorebooks/editor.js";
import { showLorebooks } from "./lorebooks/list.js";
import { markCurrent, setUpNav } from "./nav.js";
import { registerServiceWorker, showUnreachable } from "./offline.js";
import { showPersonas } from "./personas/screen.js";
import { showPreset, showPresets } from "./preset.js";
import { showRegexScript } from "./regex/editor.js";
import { showRegex } from "./regex/screen.js";
import { showSearch } from "./search.js";
import { showSettings } from "./settings.js";
import { showTextgenPreset } from "./textgen.js";
import { errorText, placeToast, reportError } from "./toast.js";

// #/<screen>/<arg>[/<sub>][?params] -> the screen's function (view, arg, {sub, params}); it may
// return a function to run when the user leaves it.
const SCREENS = {
  "": (view) => showCharacters(view),
  login: (view) => showLogin(view),
  character: (view, ref) => showCharacter(view, ref),
  chat: (view, id, { sub }) => showChat(view, id, /^\d+$/.test(sub) ? Number(sub) : null),
  inspect: (view, id, { params }) => showInspector(view, id, params),
  presets: (view) => showPresets(view),
  preset: (view, ref) => showPreset(view, ref),
  textgen: (view, ref) => showTextgenPreset(view, ref),
  settings: (view) => showSettings(view),
  lorebooks: (view) => showLorebooks(view),
  search: (view, arg, options) => showSearch(view, arg, options),
  lorebook: (view, ref, { params }) => showLorebook(view, ref, { params }),
  groups: (view) => showGroups(view),
  group: (view, ref, { params }) => showGroup(view, ref, params),
  personas: (view, ref, { params }) => showPersonas(view, ref, params),
  regex: (view, ref) => (ref ? showRegexScript(view, ref) : showRegex(view)),
  account: (view) => showAccount(view),
  admin: (view) => showAdmin(view),
};

const view = document.getElementById("view");
let leaveScreen = null;

async function whoAmI() {
  try {
    const me = await api("GET", "/auth/me");
    setCsrf(me.csrf_token);
    document.getElementById("logout").hidden = me.via !== "session";
    document.getElementById("nav-account").hidden = false;
    document.getElementById("nav-admin").hidden = !(me.is_admin && me.via !== "local");
    return me;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      document.getElementById("nav-account").hidden = true;
      document.getElementById("nav-admin").hidden = true;
      return null;
    }
    throw error;
  }
}

async function route() {
  if (leaveScreen) leaveScreen();
  leaveScreen = null;
  view.replaceChildren();
  const [path, query = ""] = window.location.hash.split("?");
  const [, screen = "", arg = "", sub = ""] = path.split("/");
  const params = new URLSearchParams(query);
  markCurrent(screen);
  try {
    if (screen !== "login" && (await whoAmI()) === null) {
      window.location.hash = "#/login";
      return;
    }
    const show = SCREENS[screen] || SCREENS[""];
    leaveScreen = await show(view, decodeURIComponent(arg), { sub, params });
  } catch (error) {
    if (error instanceof ApiError && error.status === 0) showUnreachable(view, route);
    else showFailed(error);
  }
  placeToast();
  // Keyboard users land in the new screen (unless it already put focus somewhere in it).
  if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
}

// A screen that could not be opened (a chat deleted elsewhere, a link to nothing) says so in
// the page, where it stays, not in a toast that goes by and leaves an empty page.
function showFailed(error) {
  const alerts = createAlerts();
  view.replaceChildren(
    h("h1", {}, t("This page could not be opened")),
    alerts.node,
    h("p", {}, h("a", { href: "#/" }, t("Back to the characters"))),
  );
  alerts.show(errorText(error), { retry: route });
}

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem("tavernkit.theme", theme);
}

applyTheme(
  localStorage.getItem("tavernkit.theme") ||
    (window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"),
);
document.getElementById("theme").addEventListener("click", () => {
  applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
});
document.getElementById("logout").addEventListener("click", async () => {
  try {
    await api("POST", "/auth/logout");
  } catch (error) {
    reportError(error);
  }
  setCsrf("");
  window.location.hash = "#/login";
});
window.addEventListener("hashchange", route);
setUpNav();
route();
registerServiceWorker();
