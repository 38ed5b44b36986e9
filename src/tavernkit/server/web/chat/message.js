// One stored message as the chat shows it: name and time, its actions, a fallback notice,
// the reasoning panel, the text (sanitized markdown), a mark when the reply is unfinished
// (stopped, cut off) and, on the last reply, the swipe controls.

import { button, h } from "../dom.js";
import { render } from "../markdown.js";
import { toast } from "../toast.js";
import { t } from "../i18n.js";

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

// A message's text: `mes` is a string, or (a message with images) a list of content parts.
export function textOf(mes) {
  if (!Array.isArray(mes)) return String(mes ?? "");
  return mes
    .filter((part) => part && part.type === "text")
    .map((part) => part.text)
    .join("\n");
}

// The images of a message with content parts, as URLs an <img> can show (data: or http(s)).
function imagesOf(mes) {
  if (!Array.isArray(mes)) return [];
  return mes
    .filter((part) => part && (part.type === "image_url" || part.type === "image"))
    .map((part) => (part.data ? `data:${part.mime || "image/png"};base64,${part.data}` : part.url))
    .filter((url) => /^(data:image\/|https?:)/i.test(url || ""));
}

// A stored date as the reader's locale writes it (SillyTavern's own strings stay as they are).
function when(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast(t("Message copied"), "info");
  } catch {
    toast(t("The browser refused the clipboard: select the text to copy it"));
  }
}

// `on`: {edit(message, body), branch(index), remove(message), hide(message, hidden),
// pickSwipe(message, i), swipe(), regenerateAt(index) (absent: no regenerate mid-chat)}
export function messageNode(message, isLast, on) {
  const data = message.data;
  const hidden = Boolean(data.is_system);
  const body = h("div", { class: "body" });
  // `display`: what display-only regex scripts make of the stored text (absent: the text)
  body.append(render(message.display ?? textOf(data.mes)));
  for (const url of imagesOf(data.mes)) body.append(h("img", { class: "attachment", src: url, alt: t("attached image") }));
  const number = message.index + 1;
  const node = h(
    "li",
    {
      class: `message ${data.is_user ? "user" : "char"}${hidden ? " ghost" : ""}`,
      dataset: { index: message.index, revision: message.revision || "" },
    },
    h(
      "div",
      { class: "meta" },
      h("span", { class: "name" }, data.name || ""),
      h("small", { class: "number" }, `#${message.index}`),
      data.send_date ? h("small", { class: "time" }, when(data.send_date)) : null,
      message.tokens != null ? h("small", { class: "tokens" }, t("{tokens} tokens", { tokens: message.tokens })) : null,
      h(
        "span",
        { class: "actions" },
        button(t("Copy"), () => copyText(textOf(data.mes)), { "aria-label": t("Copy message {number}", { number }) }),
        button(hidden ? t("Unhide") : t("Hide"), () => on.hide(message, !hidden), {
          "aria-label": hidden ? t("Unhide message {number}", { number }) : t("Hide message {number}", { number }),
        }),
        button(t("Edit"), () => on.edit(message, body), { "aria-label": t("Edit message {number}", { number }) }),
        button(t("Branch"), () => on.branch(message.index), { "aria-label": t("Branch at message {number}", { number }) }),
        // a reply in the middle of the chat: a new one on a new branch of the chat's tree
        on.regenerateAt && !isLast && !data.is_user && message.index > 0
          ? button(t("Regenerate"), () => on.regenerateAt(message.index), { "aria-label": t("Regenerate message {number}", { number }) })
          : null,
        button(t("Delete"), () => on.remove(message), { "aria-label": t("Delete message {number}", { number }) }),
      ),
    ),
  );
  if (hidden) node.append(h("p", { class: "status" }, t("[hidden from the prompt]")));
  const fallback = (extraOf(data).extensions || {}).fallback_notice;
  if (fallback && fallback.text) node.append(h("div", { class: "notice", role: "note" }, fallback.text));
  const reasoning = message.display_reasoning ?? reasoningOf(data);
  if (reasoning) node.append(reasoningPanel(reasoning, false));
  node.append(body);
  if (message.incomplete) node.append(h("p", { class: "status" }, `[${message.incomplete}]`));
  if (isLast && !data.is_user && Array.isArray(data.swipes) && data.swipes.length) {
    node.append(swipeControls(message, on));
  }
  return node;
}

function swipeControls(message, on) {
  const data = message.data;
  const at = data.swipe_id ?? 0;
  const count = data.swipes.length;
  const onGreeting = message.index === 0;
  return h(
    "div",
    { class: "swipes" },
    button("‹", () => on.pickSwipe(message, at - 1), { "aria-label": t("Previous swipe"), disabled: at === 0 }),
    h("span", { class: "counter", "aria-label": t("Swipe") }, `${at + 1}/${count}`),
    button("›", () => (at + 1 < count ? on.pickSwipe(message, at + 1) : on.swipe()), {
      "aria-label": t("Next swipe"),
      disabled: onGreeting && at + 1 >= count,
    }),
  );
}

export function reasoningPanel(text, open) {
  const pre = h("pre", { class: "reasoning-text" });
  pre.textContent = text;
  const copy = button(
    t("Copy"),
    async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        toast(t("Reasoning copied"), "info");
      } catch {
        window.getSelection().selectAllChildren(pre);
        toast(t("Select-all done: press Ctrl+C to copy"), "info");
      }
    },
    { class: "copy", "aria-label": t("Copy reasoning") },
  );
  return h("details", { class: "reasoning", open }, h("summary", {}, t("Reasoning")), copy, pre);
}
