// The chat's messages as one scrolling list that stays light however long the chat is. It
// opens at the newest page, loads earlier pages as the user scrolls up (and later ones back
// down), and keeps at most KEEP message nodes in the page: the far end is dropped and built
// again when scrolled back to. At the bottom, new text keeps the newest line in view; scrolled
// up, the view stays where the user put it and "Jump to newest" is offered.
//
// Nodes that are not stored messages yet (the user's message being sent, the live reply) are
// "extras": kept after the messages until the next reload.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { reportError } from "../toast.js";
import { t } from "../i18n.js";

const PAGE = 50; // messages per request
const KEEP = 150; // most message nodes in the page at once
const NEAR = 600; // pixels from an end that count as near it: the next page loads
const BOTTOM = 48; // pixels from the bottom that still count as "at the bottom"

// `base`: the chat's URL; `render(message, isLast)`: a message's node.
export function createLog(base, render) {
  const list = h("ol", { class: "log", "aria-label": t("Messages"), dataset: { turns: 0 } });
  const jump = button(t("Jump to newest"), () => showNewest().catch(reportError), { class: "jump", hidden: true });
  const node = h("div", { class: "log-wrap" }, list, jump);
  const cache = new Map(); // index -> stored message
  let total = 0;
  let lo = 0; // the rendered messages are [lo, hi)
  let hi = 0;
  let stick = true; // keep the newest text in view
  let loading = false;

  async function fetchPage(before) {
    const query = new URLSearchParams({ limit: PAGE, tokens: true });
    if (before !== null) query.set("before", before);
    const page = await api("GET", `${base}/messages?${query}`);
    total = page.total;
    for (const message of page.items) cache.set(message.index, message);
    return page.items;
  }

  const messageNodes = () => [...list.querySelectorAll(":scope > .message[data-index]")];
  const firstExtra = () => list.querySelector(":scope > .extra");
  const nodeFor = (i) => render(cache.get(i), i === total - 1);
  const atBottom = () => hi >= total && list.scrollHeight - list.scrollTop - list.clientHeight < BOTTOM;

  // The first cached index of the run of cached messages that ends at `end` (exclusive).
  function cachedFrom(end, floor) {
    let from = end;
    while (from > floor && cache.has(from - 1)) from -= 1;
    return from;
  }

  function renderRange(from, to) {
    for (const old of messageNodes()) old.remove();
    const nodes = document.createDocumentFragment();
    for (let i = from; i < to; i += 1) nodes.append(nodeFor(i));
    list.insertBefore(nodes, firstExtra());
    lo = from;
    hi = to;
  }

  // Run `change` without moving what the user is looking at (the first visible message).
  function keepView(change) {
    const top = list.getBoundingClientRect().top;
    const anchor = messageNodes().find((n) => n.getBoundingClientRect().bottom > top);
    const before = anchor ? anchor.getBoundingClientRect().top : 0;
    change();
    if (anchor && anchor.isConnected) list.scrollTop += anchor.getBoundingClientRect().top - before;
  }

  function toBottom() {
    list.scrollTop = list.scrollHeight;
    stick = true;
    jump.hidden = true;
  }

  async function loadOlder() {
    if (loading || lo === 0) return;
    loading = true;
    try {
      if (!cache.has(lo - 1)) await fetchPage(lo);
      const from = cachedFrom(lo, Math.max(0, lo - PAGE));
      keepView(() => {
        const nodes = document.createDocumentFragment();
        for (let i = from; i < lo; i += 1) nodes.append(nodeFor(i));
        list.insertBefore(nodes, list.firstChild);
        lo = from;
        const rendered = messageNodes();
        while (hi - lo > KEEP) {
          rendered.pop().remove();
          hi -= 1;
        }
      });
    } finally {
      loading = false;
    }
  }

  async function loadNewer() {
    if (loading || hi >= total) return;
    loading = true;
    try {
      const to = Math.min(total, hi + PAGE);
      if (!cache.has(to - 1)) await fetchPage(to);
      keepView(() => {
        const nodes = document.createDocumentFragment();
        for (let i = hi; i < to && cache.has(i); i += 1, hi += 1) nodes.append(nodeFor(i));
        list.insertBefore(nodes, firstExtra());
        const rendered = messageNodes();
        while (hi - lo > KEEP) {
          rendered.shift().remove();
          lo += 1;
        }
      });
    } finally {
      loading = false;
    }
  }

  // Load pages until the list can scroll (a short first page of a long chat).
  async function fill() {
    while (lo > 0 && list.scrollHeight <= list.clientHeight + NEAR && !loading) {
      const before = lo;
      await loadOlder();
      if (lo === before) break;
    }
  }

  list.addEventListener("scroll", () => {
    stick = atBottom();
    jump.hidden = stick;
    if (list.scrollTop < NEAR) loadOlder().catch(reportError);
    if (list.scrollHeight - list.scrollTop - list.clientHeight < NEAR) loadNewer().catch(reportError);
  });

  async function showNewest() {
    cache.clear();
    await fetchPage(null);
    renderRange(cachedFrom(total, 0), total);
    toBottom();
    await fill();
    toBottom();
  }

  // Open the chat at message `index` (a search result, a link), marked.
  async function showAt(index) {
    cache.clear();
    await fetchPage(index + Math.floor(PAGE / 2));
    const end = Math.min(total, index + Math.floor(PAGE / 2));
    renderRange(cachedFrom(end, 0), end);
    const target = list.querySelector(`:scope > .message[data-index="${index}"]`);
    if (!target) return showNewest();
    target.classList.add("found");
    target.scrollIntoView({ block: "center" });
    stick = atBottom();
    jump.hidden = stick;
    await fill();
    return undefined;
  }

  // Read the shown messages again (after a turn or an edit): the newest ones if the user was
  // at the end, else the same stretch, scrolled where it was. Extras go.
  async function reload() {
    const atEnd = hi >= total;
    const wasStuck = stick;
    const saved = list.scrollTop;
    const from = lo;
    cache.clear();
    await fetchPage(atEnd ? null : hi);
    const end = atEnd ? total : Math.min(hi, total);
    const start = Math.max(0, Math.min(from, end - 1), end - KEEP);
    while (cachedFrom(end, 0) > start) await fetchPage(cachedFrom(end, 0));
    for (const extra of list.querySelectorAll(":scope > .extra")) extra.remove();
    renderRange(cachedFrom(end, start), end);
    if (wasStuck) toBottom();
    else list.scrollTop = saved;
    jump.hidden = atBottom();
  }

  // Add a node that is not a stored message yet (after the messages).
  function appendExtra(extra) {
    extra.classList.add("extra");
    list.append(extra);
    followNewest();
  }

  // New text arrived at the end: keep it in view, unless the user scrolled away.
  function followNewest() {
    if (stick) toBottom();
    else jump.hidden = false;
  }

  const lastMessage = () => cache.get(total - 1) || null;
  const lastNode = () => list.querySelector(`:scope > .message[data-index="${total - 1}"]`);

  return {
    node,
    list,
    total: () => total,
    showNewest,
    showAt,
    reload,
    appendExtra,
    followNewest,
    lastMessage,
    lastNode,
  };
}
