// The server's HTTP API as the UI uses it: JSON requests that carry the session's CSRF token
// (a cookie session needs it on every change), typed errors as thrown ApiError, and a turn's
// event stream (SSE) that survives a dropped connection and a page reload.

import { t } from "./i18n.js";

let csrfToken = "";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.detail)) || t("HTTP {status}", { status }));
    this.status = status;
    this.body = body;
  }
}

// Whether the server refused a change because what it was made against changed since.
export function isStale(error) {
  return error instanceof ApiError && Boolean(error.body) && error.body.type === "StaleRevision";
}

export function setCsrf(token) {
  csrfToken = token || "";
}

// `ifMatch`: the revision the change was made against (a message's, a card's, a lorebook
// entry's); changed since, the server refuses with 409 StaleRevision and writes nothing.
export async function api(method, path, body, { raw = false, ifMatch = "" } = {}) {
  const headers = {};
  if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  if (ifMatch) headers["If-Match"] = `"${ifMatch}"`;
  let payload;
  if (body instanceof FormData || body instanceof Blob) {
    payload = body; // the browser sets the type (a Blob's own, e.g. an avatar's image/png)
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
  } catch (error) {
    // no answer at all (offline, or the server is not running): status 0, type Unreachable
    if (!(error instanceof TypeError)) throw error;
    throw new ApiError(0, { type: "Unreachable", message: t("The server cannot be reached") });
  }
  if (raw) return response;
  const text = await response.text();
  const data = text ? safeJson(text) : null;
  if (!response.ok) throw new ApiError(response.status, data && (data.error || data));
  return data;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}

// A page being left closes its streams too; that is no reason to forget their turns.
let leaving = false;
for (const type of ["beforeunload", "pagehide"]) {
  window.addEventListener(type, () => {
    leaving = true;
  });
}

// Where a chat's running turn is remembered, so a reload picks its stream up again.
const turnKey = (chatId) => `tavernkit.turn.${chatId}`;

export function rememberedTurn(chatId) {
  try {
    return JSON.parse(localStorage.getItem(turnKey(chatId)) || "null");
  } catch {
    return null;
  }
}

export function forgetTurn(chatId) {
  localStorage.removeItem(turnKey(chatId));
}

// Watch a turn's events from the start (the log replays what was already sent, so a reload
// rebuilds the whole reply). After a dropped connection EventSource reconnects by itself,
// sending Last-Event-ID; when the browser gives up instead (it closes the source on a failed
// reconnect, e.g. while offline) a new source asks for the events after the last one seen
// (?after=), so nothing is shown twice. `on` maps event types to handlers; `on.lost` runs
// when the turn cannot be reached after RETRIES tries in a row.
const RETRIES = 8;
const RETRY_MS = 750;

export function watchTurn(chatId, eventsUrl, kind, on) {
  localStorage.setItem(turnKey(chatId), JSON.stringify({ url: eventsUrl, kind }));
  let source = null;
  let lastId = "";
  let failures = 0;
  let finished = false;
  let timer = null;

  const handle = (type) => (ev) => {
    failures = 0;
    if (ev.lastEventId) lastId = ev.lastEventId;
    let data = {};
    try {
      data = JSON.parse(ev.data);
    } catch {
      /* a frame without JSON carries nothing for the UI */
    }
    if (type === "done") {
      finished = true;
      source.close();
      forgetTurn(chatId);
    }
    if (on[type]) on[type](data, ev.lastEventId);
  };

  const open = () => {
    const url = lastId ? `${eventsUrl}?${new URLSearchParams({ after: lastId })}` : eventsUrl;
    source = new EventSource(url);
    for (const type of ["text", "withdraw", "reasoning", "tool", "notice", "error", "done"]) {
      source.addEventListener(type, handle(type));
    }
    source.onerror = () => {
      if (finished || leaving || source.readyState !== EventSource.CLOSED) return;
      failures += 1;
      if (failures >= RETRIES) {
        // A turn the server no longer knows (it restarted): stop asking.
        finished = true;
        forgetTurn(chatId);
        if (on.lost) on.lost();
        return;
      }
      timer = setTimeout(open, RETRY_MS);
    };
  };
  open();
  return {
    close() {
      finished = true;
      clearTimeout(timer);
      source.close();
    },
    url: eventsUrl,
  };
}
