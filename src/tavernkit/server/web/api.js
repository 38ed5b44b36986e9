// The server's HTTP API as the UI uses it: JSON requests that carry the session's CSRF token
// (a cookie session needs it on every change), typed errors as thrown ApiError, and a turn's
// event stream (SSE) that survives a dropped connection and a page reload.

let csrfToken = "";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.detail)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function setCsrf(token) {
  csrfToken = token || "";
}

export async function api(method, path, body, { raw = false } = {}) {
  const headers = {};
  if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let payload;
  if (body instanceof FormData) {
    payload = body;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
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
// rebuilds the whole reply). EventSource reconnects by itself after a dropped connection,
// sending Last-Event-ID, so nothing is shown twice. `on` maps event types to handlers.
export function watchTurn(chatId, eventsUrl, kind, on) {
  localStorage.setItem(turnKey(chatId), JSON.stringify({ url: eventsUrl, kind }));
  const source = new EventSource(eventsUrl);
  const handle = (type) => (ev) => {
    let data = {};
    try {
      data = JSON.parse(ev.data);
    } catch {
      /* a frame without JSON carries nothing for the UI */
    }
    if (type === "done") {
      source.close();
      forgetTurn(chatId);
    }
    if (on[type]) on[type](data, ev.lastEventId);
  };
  for (const type of ["text", "reasoning", "tool", "notice", "error", "done"]) {
    source.addEventListener(type, handle(type));
  }
  source.onerror = () => {
    // A turn the server no longer knows (restarted) cannot resume: stop asking.
    if (source.readyState === EventSource.CLOSED && !leaving) {
      forgetTurn(chatId);
      if (on.lost) on.lost();
    }
  };
  return {
    close() {
      source.close();
    },
    url: eventsUrl,
  };
}
