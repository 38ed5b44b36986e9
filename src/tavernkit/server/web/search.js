// Message search: the server's full-text search over the user's chats (GET /search/messages),
// as the Search screen (#/search?q=) and as the lists the chat screen shows (this chat, this
// character's chats). A hit links to its chat opened at the message (#/chat/<id>/<index>).

import { api } from "./api.js";
import { button, h } from "./dom.js";
import { reportError } from "./toast.js";
import { t } from "./i18n.js";

const PAGE = 30;

// The search's terms as the server reads them: words, or "a phrase" in quotes.
function termsOf(q) {
  return [...q.matchAll(/"([^"]+)"|(\S+)/g)].map((m) => (m[1] || m[2]).toLowerCase()).filter(Boolean);
}

// `text` with the terms marked (<mark>, built as nodes: the snippet is plain text).
function marked(text, terms) {
  const out = [];
  const lower = text.toLowerCase();
  let at = 0;
  while (at < text.length) {
    let next = -1;
    let length = 0;
    for (const term of terms) {
      const i = lower.indexOf(term, at);
      if (i !== -1 && (next === -1 || i < next)) {
        next = i;
        length = term.length;
      }
    }
    if (next === -1) break;
    if (next > at) out.push(text.slice(at, next));
    out.push(h("mark", {}, text.slice(next, next + length)));
    at = next + length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

export function hitItem(hit, terms, { showChat = true } = {}) {
  const where = showChat ? `${hit.character_name || hit.chat_name} · ${hit.chat_name} · ` : "";
  return h(
    "li",
    { class: "hit" },
    h(
      "a",
      { href: `#/chat/${encodeURIComponent(hit.chat_id)}/${hit.index}` },
      h("span", { class: "where" }, `${where}#${hit.index} ${hit.name}`),
      h("span", { class: "snippet" }, ...marked(hit.snippet, terms)),
    ),
  );
}

// A search box and its results, paged ("More results"). `scope`: {chat} or {character}.
export function searchBox(label, scope = {}, { showChat = true } = {}) {
  const input = h("input", { type: "search", placeholder: label, "aria-label": label });
  const list = h("ul", { class: "hits", "aria-label": t("{label}: results", { label }) });
  const status = h("p", { class: "muted", role: "status" });
  const more = button(t("More results"), () => load(true), { hidden: true });
  let offset = 0;
  let timer;

  async function load(next = false) {
    const q = input.value.trim();
    if (!q) {
      list.replaceChildren();
      status.textContent = "";
      more.hidden = true;
      return;
    }
    offset = next ? offset + PAGE : 0;
    const query = new URLSearchParams({ q, offset, limit: PAGE, ...scope });
    const page = await api("GET", `/search/messages?${query}`);
    if (q !== input.value.trim()) return; // a newer search is on its way
    const items = page.items.map((hit) => hitItem(hit, termsOf(q), { showChat }));
    if (next) list.append(...items);
    else list.replaceChildren(...items);
    status.textContent = page.total ? (page.total === 1 ? t("1 message found") : t("{total} messages found", { total: page.total })) : t("No message found");
    more.hidden = offset + PAGE >= page.total;
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => load().catch(reportError), 250);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      clearTimeout(timer);
      load().catch(reportError);
    }
  });
  return { node: h("div", { class: "search" }, input, status, list, more), input, load };
}

export async function showSearch(view, _arg, { params }) {
  const box = searchBox(t("Search all chats"));
  view.append(h("div", { class: "toolbar" }, h("h1", {}, t("Search"))), box.node);
  const q = params.get("q") || "";
  box.input.value = q;
  // the query goes into the address, so Back returns to the results
  box.input.addEventListener("change", () => {
    history.replaceState(null, "", `#/search?${new URLSearchParams({ q: box.input.value })}`);
  });
  if (q) await box.load();
  box.input.focus();
}
