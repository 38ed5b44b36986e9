// Short notices that go by themselves (a note saved, a text copied, an import done). An error
// a user must act on is not a toast: a screen keeps it in view until dismissed
// (chat/alerts.js).

import { ApiError } from "./api.js";

export function toast(message, kind = "error") {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.dataset.kind = kind;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

// What an error says to a user: the server's message (never a stack), with its status.
// `withField`: the field at fault is named too when the message does not say it (a request
// validation error's message is only the rule: "String should have at least 8 characters").
export function errorText(error, { withField = false } = {}) {
  if (!(error instanceof ApiError)) return String(error);
  if (error.status === 0) return error.message; // unreachable: no HTTP status to show
  const field = withField && error.body && typeof error.body.field === "string" ? error.body.field.replace(/^body\./, "") : "";
  const named = field && !error.message.includes(field) ? ` (${field.replaceAll("_", " ")})` : "";
  return `${error.status}: ${error.message}${named}`;
}

export function reportError(error) {
  toast(errorText(error));
}
