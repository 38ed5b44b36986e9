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
export function errorText(error) {
  return error instanceof ApiError ? `${error.status}: ${error.message}` : String(error);
}

export function reportError(error) {
  toast(errorText(error));
}
