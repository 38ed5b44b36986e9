// Short notices that go by themselves (a note saved, a text copied, an import done). An error
// a user must act on is not a toast: a screen keeps it in view until dismissed
// (chat/alerts.js).

import { ApiError } from "./api.js";
import { localizedError } from "./errors.js";
import { language, t } from "./i18n.js";

// What went wrong, by the answer's error type or status, in the UI's language, for an answer
// whose code errors.js cannot word: the server's own message (its detail: which name, which
// field) is English, so a reader of another language gets the gist first.
const HEADLINES_BY_TYPE = {
  NameTaken: () => t("That name is taken"),
  ChatBusy: () => t("The chat is busy"),
  StaleRevision: () => t("Changed in another tab or device"),
  ValidationError: () => t("Invalid input"),
  FormatError: () => t("Invalid input"),
};
const HEADLINES_BY_STATUS = {
  400: () => t("Refused"),
  401: () => t("Not signed in"),
  403: () => t("Not allowed"),
  404: () => t("Not found"),
  409: () => t("Conflict"),
  413: () => t("Too large"),
  422: () => t("Invalid input"),
  429: () => t("Too many requests; try again later"),
  500: () => t("Server error"),
  502: () => t("A server this one relies on failed"),
  503: () => t("The server cannot reach its database now; try again"),
};

function headline(error) {
  const type = error.body && error.body.type;
  const pick = HEADLINES_BY_TYPE[type] || HEADLINES_BY_STATUS[error.status];
  return pick ? pick() : "";
}

// The controls kept at the bottom of the screen: the chat's composer, an editor's save bar and
// (on a phone) its floating Save button. On a phone a toast sits just above them.
const BOTTOM_CONTROLS = ".composer, .save-bar, .editor-bar .save";

// How far up from the screen's bottom those now in its lower half reach (0 with none).
function bottomControlsHeight() {
  const height = window.innerHeight;
  let lift = 0;
  for (const node of document.querySelectorAll(BOTTOM_CONTROLS)) {
    const top = node.getBoundingClientRect().top;
    if (top > height / 2 && top < height) lift = Math.max(lift, height - top);
  }
  return Math.round(lift);
}

// A toast still shown when the screen changes (a character saved, then its chat opened) moves
// to sit above the new screen's bottom controls (it stayed over the chat's Send button).
export function placeToast() {
  const box = document.getElementById("toast");
  if (box.classList.contains("shown")) box.style.setProperty("--toast-lift", `${bottomControlsHeight()}px`);
}

export function toast(message, kind = "error") {
  const box = document.getElementById("toast");
  if (!box.dataset.dismissible) {
    // a tap puts it away at once (on a phone it lies over the page until it goes)
    box.dataset.dismissible = "true";
    box.addEventListener("click", () => box.classList.remove("shown"));
  }
  box.textContent = message;
  box.dataset.kind = kind;
  box.style.setProperty("--toast-lift", `${bottomControlsHeight()}px`);
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

// What an error says to a user (never a stack). In English: the server's message, with its
// status (the server writes English, and its message is the most specific). In another
// language: the message errors.js words from the answer's code and parameters, else the gist
// and the server's English message. `withField`: the field at fault is named too when the
// message does not say it (a request validation error's message is only the rule: "String
// should have at least 8 characters").
export function errorText(error, { withField = false } = {}) {
  if (!(error instanceof ApiError)) return String(error);
  if (error.status === 0) return error.message; // unreachable: no HTTP status to show
  const worded = language() === "en" ? null : localizedError(error.body);
  if (worded) return worded;
  const field = withField && error.body && typeof error.body.field === "string" ? error.body.field.replace(/^body\./, "") : "";
  const named = field && !error.message.includes(field) ? ` (${field.replaceAll("_", " ")})` : "";
  const said = `${error.status}: ${error.message}${named}`;
  const gist = language() === "en" ? "" : headline(error);
  return gist ? `${gist} (${said})` : said;
}

export function reportError(error) {
  toast(errorText(error));
}
