// The UI's shell: hash routes (#/, #/chat/<id>, #/inspect/<id>, #/login), the theme, sign-in
// when the server has accounts, and a toast for errors. Each screen is its own module.

import { api, ApiError, setCsrf } from "./api.js";
import { showCharacters } from "./characters.js";
import { showChat } from "./chat.js";
import { showInspector } from "./inspector.js";
import { showLogin } from "./login.js";
import { showLorebook, showLorebooks } from "./lorebook.js";
import { showPreset, showPresets } from "./preset.js";
import { showSettings } from "./settings.js";
import { showTextgenPreset } from "./textgen.js";

const view = document.getElementById("view");
let leaveScreen = null;

export function toast(message, kind = "error") {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.dataset.kind = kind;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

export function reportError(error) {
  toast(error instanceof ApiError ? `${error.status}: ${error.message}` : String(error));
}

async function whoAmI() {
  try {
    const me = await api("GET", "/auth/me");
    setCsrf(me.csrf_token);
    document.getElementById("logout").hidden = me.via !== "session";
    return me;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

async function route() {
  if (leaveScreen) leaveScreen();
  leaveScreen = null;
  view.replaceChildren();
  const [, screen = "", arg = ""] = window.location.hash.split("/");
  try {
    if (screen !== "login" && (await whoAmI()) === null) {
      window.location.hash = "#/login";
      return;
    }
    if (screen === "login") leaveScreen = await showLogin(view);
    else if (screen === "chat") leaveScreen = await showChat(view, decodeURIComponent(arg));
    else if (screen === "presets") leaveScreen = await showPresets(view);
    else if (screen === "preset") leaveScreen = await showPreset(view, decodeURIComponent(arg));
    else if (screen === "textgen") leaveScreen = await showTextgenPreset(view, decodeURIComponent(arg));
    else if (screen === "settings") leaveScreen = await showSettings(view);
    else if (screen === "lorebooks") leaveScreen = await showLorebooks(view);
    else if (screen === "lorebook") leaveScreen = await showLorebook(view, decodeURIComponent(arg));
    else if (screen === "inspect") leaveScreen = await showInspector(view, decodeURIComponent(arg));
    else leaveScreen = await showCharacters(view);
  } catch (error) {
    reportError(error);
  }
  // Keyboard users land in the new screen (unless it already put focus somewhere in it).
  if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
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
route();
