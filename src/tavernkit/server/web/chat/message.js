// One stored message as the chat shows it: name and time, its actions, a fallback notice,
// the reasoning panel, the text (sanitized markdown), a mark when the reply is unfinished
// (stopped, cut off) and, on the last reply, the swipe controls.

import { button, h } from "../dom.js";
import { render } from "../markdown.js";
import { toast } from "../toast.js";

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

// `on`: {edit(message, body), branch(index), remove(message), pickSwipe(message, i), swipe()}
export function messageNode(message, isLast, on) {
  const data = message.data;
  const body = h("div", { class: "body" });
  body.append(render(data.mes));
  const number = message.index + 1;
  const node = h(
    "li",
    { class: `message ${data.is_user ? "user" : "char"}`, dataset: { index: message.index } },
    h(
      "div",
      { class: "meta" },
      h("span", { class: "name" }, data.name || ""),
      data.send_date ? h("small", { class: "time" }, String(data.send_date)) : null,
      h(
        "span",
        { class: "actions" },
        button("Edit", () => on.edit(message, body), { "aria-label": `Edit message ${number}` }),
        button("Branch", () => on.branch(message.index), { "aria-label": `Branch at message ${number}` }),
        button("Delete", () => on.remove(message), { "aria-label": `Delete message ${number}` }),
      ),
    ),
  );
  const fallback = (extraOf(data).extensions || {}).fallback_notice;
  if (fallback && fallback.text) node.append(h("div", { class: "notice", role: "note" }, fallback.text));
  const reasoning = reasoningOf(data);
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
    button("‹", () => on.pickSwipe(message, at - 1), { "aria-label": "Previous swipe", disabled: at === 0 }),
    h("span", { class: "counter", "aria-label": "Swipe" }, `${at + 1}/${count}`),
    button("›", () => (at + 1 < count ? on.pickSwipe(message, at + 1) : on.swipe()), {
      "aria-label": "Next swipe",
      disabled: onGreeting && at + 1 >= count,
    }),
  );
}

export function reasoningPanel(text, open) {
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
