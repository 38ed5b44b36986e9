// The chat screen: the messages (sanitized markdown), swipes with a counter (the greetings
// are the first message's swipes), the per-swipe reasoning panel, edit / delete / branch,
// the composer (send, stop, regenerate, continue, impersonate), a reply streamed live from
// the server's turn (picked up again after a reload or a dropped connection), fallback
// notices, the persona switcher, the author's note and the character's other chats.

import { api, rememberedTurn, watchTurn } from "./api.js";
import { reportError, toast } from "./app.js";
import { button, h } from "./dom.js";
import { render } from "./markdown.js";
import { variablesSection } from "./settings.js";

const PERSONA_KEY = "tavernkit.persona";

export async function showChat(view, chatId) {
  const chat = await api("GET", `/chats/${encodeURIComponent(chatId)}`);
  const base = `/chats/${encodeURIComponent(chat.id)}`;
  let messages = [];
  let stream = null; // the watched turn: {close, url}
  let turnId = null;

  // data-turns counts the turns shown to their end (the chat re-read after each): what a
  // script or test waits on.
  const log = h("ol", { class: "log", "aria-label": "Messages", "aria-live": "polite", dataset: { turns: 0 } });
  const input = h("textarea", {
    rows: 3,
    placeholder: "Type a message (Enter sends, Shift+Enter for a new line)",
    "aria-label": "Message",
  });
  const stop = button("Stop", () => stopTurn(), { disabled: true, class: "danger" });
  const personaSelect = h("select", { "aria-label": "Persona" }, h("option", { value: "" }, "Default persona"));
  const chatList = h("ul", { class: "chat-list", "aria-label": "Chats" });
  const chatSearch = h("input", { type: "search", placeholder: "Search chats", "aria-label": "Search chats" });

  // -- messages ------------------------------------------------------------------------------

  async function reload() {
    const page = await api("GET", `${base}/messages?limit=500`);
    messages = page.items.reverse();
    log.replaceChildren(...messages.map((m, i) => messageNode(m, i === messages.length - 1)));
    log.lastElementChild?.scrollIntoView({ block: "end" });
  }

  // The active swipe's own extra (swipe_info), else the message's.
  function extraOf(data) {
    const info = (data.swipe_info || [])[data.swipe_id ?? 0];
    return (info && info.extra) || data.extra || {};
  }

  function reasoningOf(data) {
    const own = extraOf(data).reasoning;
    const text = own ?? (data.extra && data.extra.reasoning) ?? "";
    return text === "\u200b" ? "" : text;
  }

  function messageNode(message, isLast) {
    const data = message.data;
    const body = h("div", { class: "body" });
    body.append(render(data.mes));
    const node = h(
      "li",
      { class: `message ${data.is_user ? "user" : "char"}`, dataset: { index: message.index } },
      h("div", { class: "meta" }, h("span", { class: "name" }, data.name || ""), actions(message, body)),
    );
    const fallback = (extraOf(data).extensions || {}).fallback_notice;
    if (fallback && fallback.text) node.append(h("div", { class: "notice", role: "note" }, fallback.text));
    const reasoning = reasoningOf(data);
    if (reasoning) node.append(reasoningPanel(reasoning, false));
    node.append(body);
    if (isLast && !data.is_user && Array.isArray(data.swipes) && data.swipes.length) {
      node.append(swipeControls(message));
    }
    return node;
  }

  function actions(message, body) {
    return h(
      "span",
      { class: "actions" },
      button("Edit", () => editMessage(message, body), { "aria-label": `Edit message ${message.index + 1}` }),
      button("Branch", () => branchAt(message.index), { "aria-label": `Branch at message ${message.index + 1}` }),
      button("Delete", () => deleteMessage(message), { "aria-label": `Delete message ${message.index + 1}` }),
    );
  }

  function swipeControls(message) {
    const data = message.data;
    const at = data.swipe_id ?? 0;
    const count = data.swipes.length;
    const onGreeting = message.index === 0;
    return h(
      "div",
      { class: "swipes" },
      button("‹", () => pickSwipe(message, at - 1), { "aria-label": "Previous swipe", disabled: at === 0 }),
      h("span", { class: "counter", "aria-label": "Swipe" }, `${at + 1}/${count}`),
      button(
        "›",
        () => (at + 1 < count ? pickSwipe(message, at + 1) : startTurn("swipe")),
        { "aria-label": "Next swipe", disabled: onGreeting && at + 1 >= count },
      ),
    );
  }

  async function pickSwipe(message, swipe) {
    try {
      await api("PUT", `${base}/messages/${message.index}/swipe`, { swipe });
      await reload();
    } catch (error) {
      reportError(error);
    }
  }

  function editMessage(message, body) {
    const area = h("textarea", { rows: 5, "aria-label": "Edit message" });
    area.value = message.data.mes;
    const save = async () => {
      try {
        await api("PATCH", `${base}/messages/${message.index}`, { text: area.value });
        await reload();
      } catch (error) {
        reportError(error);
      }
    };
    body.replaceChildren(area, h("div", { class: "row" }, button("Save", save), button("Cancel", () => reload().catch(reportError))));
    area.focus();
  }

  async function deleteMessage(message) {
    if (!window.confirm(`Delete message ${message.index + 1}?`)) return;
    try {
      await api("DELETE", `${base}/messages/${message.index}`);
      await reload();
    } catch (error) {
      reportError(error);
    }
  }

  async function branchAt(index) {
    try {
      const branch = await api("POST", `${base}/branch`, { message_index: index });
      window.location.hash = `#/chat/${encodeURIComponent(branch.id)}`;
    } catch (error) {
      reportError(error);
    }
  }

  // -- turns ---------------------------------------------------------------------------------

  async function startTurn(kind, text = "") {
    const persona = personaSelect.value;
    const body = { kind, text, ...(persona ? { overrides: { persona } } : {}) };
    try {
      const started = await api("POST", `${base}/turns`, body);
      follow(started.events, kind);
      return true;
    } catch (error) {
      reportError(error);
      return false;
    }
  }

  // Show a turn's events as they come: text and reasoning in a live message (or, for an
  // impersonation, in the composer), notices above it; the stored chat is read again at the end.
  function follow(eventsUrl, kind) {
    if (stream) stream.close();
    turnId = eventsUrl.split("/turns/")[1].split("/")[0];
    stop.disabled = false;
    const last = log.lastElementChild;
    const replaces = kind === "swipe" || kind === "regenerate";
    if (replaces && last && last.classList.contains("char")) last.hidden = true;
    let text = kind === "continue" && messages.length ? messages[messages.length - 1].data.mes : "";
    let reasoning = "";
    const body = h("div", { class: "body" });
    const panel = reasoningPanel("", true);
    panel.hidden = true;
    const live = h(
      "li",
      { class: "message char live", "aria-busy": "true" },
      h("div", { class: "meta" }, h("span", { class: "name" }, chat.character_name || ""), h("span", { class: "typing" }, "writing…")),
      panel,
      body,
    );
    if (kind !== "impersonate") log.append(live);
    else input.value = "";
    let pending = false;
    const paint = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        if (kind === "impersonate") {
          input.value = text;
          return;
        }
        body.replaceChildren(render(text));
        panel.querySelector("pre").textContent = reasoning;
        panel.hidden = !reasoning;
        live.scrollIntoView({ block: "end" });
      });
    };
    const finish = async () => {
      stream = null;
      turnId = null;
      stop.disabled = true;
      log.dataset.streamed = text; // the reply as it streamed (before the stored one is read)
      await reload().catch(reportError);
      log.dataset.turns = Number(log.dataset.turns) + 1;
    };
    stream = watchTurn(chat.id, eventsUrl, kind, {
      text(data) {
        text += data.text || "";
        paint();
      },
      reasoning(data) {
        reasoning += data.text || "";
        paint();
      },
      notice(data) {
        if (data.kind === "started") return;
        live.before(h("li", { class: "notice", role: "note" }, data.text || data.kind));
      },
      error(data) {
        live.before(h("li", { class: "notice error", role: "alert" }, data.message || data.code || "the turn failed"));
      },
      done(data) {
        if (data.status === "failed" && kind === "impersonate") toast("Impersonation failed");
        finish();
      },
      lost() {
        finish();
      },
    });
  }

  async function stopTurn() {
    if (!turnId) return;
    try {
      await api("DELETE", `${base}/turns/${turnId}`);
    } catch (error) {
      reportError(error);
    }
  }

  async function send() {
    const text = input.value;
    if (!text.trim()) return;
    if (await startTurn("send", text)) {
      input.value = "";
      // The user's message is stored when the turn starts: show it at once.
      log.append(h("li", { class: "message user pending" }, h("div", { class: "body" }, render(text))));
    }
  }

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape") {
      stopTurn();
    }
  });

  // -- side panels ---------------------------------------------------------------------------

  async function loadPersonas() {
    try {
      const page = await api("GET", "/personas?limit=200");
      for (const persona of page.items) personaSelect.append(h("option", { value: persona.name }, persona.name));
      personaSelect.value = localStorage.getItem(PERSONA_KEY) || "";
    } catch (error) {
      reportError(error);
    }
  }
  personaSelect.addEventListener("change", () => localStorage.setItem(PERSONA_KEY, personaSelect.value));

  async function loadChats() {
    if (!chat.character_id) return;
    const page = await api("GET", `/chats?${new URLSearchParams({ character: chat.character_id, limit: 500 })}`);
    const needle = chatSearch.value.trim().toLowerCase();
    chatList.replaceChildren(
      ...page.items
        .filter((c) => !needle || c.name.toLowerCase().includes(needle))
        .map((c) =>
          h(
            "li",
            { class: c.id === chat.id ? "current" : "" },
            h("a", { href: `#/chat/${encodeURIComponent(c.id)}` }, c.name),
            h("small", {}, ` ${c.message_count} messages`),
          ),
        ),
    );
  }
  chatSearch.addEventListener("input", () => loadChats().catch(reportError));

  const newChat = button("New chat", async () => {
    try {
      const made = await api("POST", "/chats", { character: chat.character_id });
      window.location.hash = `#/chat/${encodeURIComponent(made.id)}`;
    } catch (error) {
      reportError(error);
    }
  });

  const note = await api("GET", `/ui/chats/${encodeURIComponent(chat.id)}/authors-note`);
  const noteText = h("textarea", { rows: 3, "aria-label": "Author's note" });
  noteText.value = note.text;
  const noteDepth = h("input", { type: "number", min: 0, value: note.depth, "aria-label": "Author's note depth" });
  const notePanel = h(
    "details",
    { class: "panel" },
    h("summary", {}, "Author's note"),
    noteText,
    h("label", {}, "Depth ", noteDepth),
    button("Save note", async () => {
      try {
        await api("PUT", `/ui/chats/${encodeURIComponent(chat.id)}/authors-note`, {
          ...note,
          text: noteText.value,
          depth: Number(noteDepth.value) || 0,
        });
        toast("Author's note saved", "info");
      } catch (error) {
        reportError(error);
      }
    }),
  );

  view.append(
    h(
      "div",
      { class: "chat-screen" },
      h(
        "aside",
        { class: "side", "aria-label": "Chat tools" },
        h("h2", {}, chat.character_name || "Chat"),
        h("a", { href: `#/inspect/${encodeURIComponent(chat.id)}` }, "Prompt inspector"),
        personaSelect,
        notePanel,
        h("details", { class: "panel" }, h("summary", {}, "Chats"), newChat, chatSearch, chatList),
        h("details", { class: "panel" }, h("summary", {}, "Chat variables"), await variablesSection(`${base}/variables`, "Chat variables")),
      ),
      h(
        "section",
        { class: "conversation", "aria-label": chat.name },
        log,
        h(
          "div",
          { class: "composer" },
          input,
          h(
            "div",
            { class: "row" },
            button("Send", send, { class: "primary" }),
            stop,
            button("Regenerate", () => startTurn("regenerate")),
            button("Continue", () => startTurn("continue")),
            button("Impersonate", () => startTurn("impersonate")),
          ),
        ),
      ),
    ),
  );
  await Promise.all([reload(), loadPersonas(), loadChats()]);
  const running = rememberedTurn(chat.id);
  if (running) follow(running.url, running.kind);
  input.focus();
  return () => {
    if (stream) stream.close();
  };
}

function reasoningPanel(text, open) {
  const pre = h("pre", { class: "reasoning-text" });
  pre.textContent = text;
  const copy = button(
    "Copy",
    async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        toast("Reasoning copied", "info");
      } catch {
        window.getSelection().selectAllChildren(pre);
        toast("Select-all done: press Ctrl+C to copy", "info");
      }
    },
    { class: "copy", "aria-label": "Copy reasoning" },
  );
  return h("details", { class: "reasoning", open }, h("summary", {}, "Reasoning"), copy, pre);
}
