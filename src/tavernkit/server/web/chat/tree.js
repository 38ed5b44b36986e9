// The chat tree panel of the chat screen's side: where the chat branches (a reply regenerated
// in the middle of the chat, a message resent), each branch point with its alternatives and
// their first lines; a click makes that alternative's path the chat's current one
// (PUT /chats/{id}/path) and the screen redraws the log. The panel owns only the tree it
// last read; the screen tells it to read again after a turn or an edit.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { t } from "../i18n.js";

function previewText(preview) {
  if (!preview) return t("(no message yet)");
  return `${preview.name || (preview.is_user ? t("You") : "")}: ${preview.text || "…"}`;
}

// `onSwitch()`: the current path changed (redraw the log); `fail(error, retry)`: the
// screen's persistent alert; `list()`: the log's list, whose messages at a branch point get
// a version switcher (‹ Version 2/3 ›)
export function createTree(base, { onSwitch, fail, list }) {
  const summary = h("summary", {}, t("Chat tree"));
  const body = h("div", { class: "tree-body" });
  const node = h("details", { class: "panel chat-tree" }, summary, body);
  let tree = null;

  async function load() {
    tree = await api("GET", `${base}/tree`);
    render();
  }

  // A message where the chat branches, on the current path: step to the other versions.
  function decorate(node) {
    for (const old of node.querySelectorAll(":scope > .versions")) old.remove();
    const index = Number(node.dataset.index);
    const point = tree && tree.points.find((p) => p.index === index);
    const at = point ? point.alternatives.findIndex((a) => a.on_path) : -1;
    if (at < 0) return node;
    const count = point.alternatives.length;
    const to = (i) => () => choose(point.alternatives[i].branch);
    node.append(
      h(
        "div",
        { class: "versions" },
        button("‹", to(at - 1), { "aria-label": t("Previous version of message {number}", { number: index + 1 }), disabled: at === 0 }),
        h("span", { class: "counter" }, t("Version {at}/{count}", { at: at + 1, count })),
        button("›", to(at + 1), { "aria-label": t("Next version of message {number}", { number: index + 1 }), disabled: at === count - 1 }),
      ),
    );
    return node;
  }

  function mark() {
    for (const node of list().querySelectorAll(":scope > .message")) decorate(node);
  }

  async function choose(branch) {
    try {
      tree = await api("PUT", `${base}/path`, { branch });
      render();
      await onSwitch();
    } catch (error) {
      fail(error, () => choose(branch));
    }
  }

  function alternative(alt) {
    const label = [previewText(alt.preview)];
    if (alt.on_path) label.unshift(h("span", { class: "badge" }, t("shown")), " ");
    const pick = button(label, () => choose(alt.branch), {
      class: `alternative${alt.on_path ? " on-path" : ""}`,
      "aria-current": alt.on_path ? "true" : "false",
      disabled: alt.on_path && alt.branch === tree.current,
    });
    return h("li", {}, pick);
  }

  function render() {
    mark();
    summary.textContent = tree.points.length ? t("Chat tree ({count} branches)", { count: tree.branches.length }) : t("Chat tree");
    if (!tree.points.length) {
      body.replaceChildren(
        h("p", { class: "hint" }, t("One path so far. Regenerate a reply in the middle of the chat to start a branch; the old one stays here.")),
      );
      return;
    }
    body.replaceChildren(
      h(
        "ol",
        { class: "branch-points" },
        ...tree.points.map((point) =>
          h(
            "li",
            { class: "branch-point", dataset: { index: point.index } },
            h("h3", {}, t("At message #{index}", { index: point.index })),
            h("ul", { class: "alternatives", "aria-label": t("Alternatives at message #{index}", { index: point.index }) }, ...point.alternatives.map(alternative)),
          ),
        ),
      ),
    );
  }

  return { node, load, decorate, open: () => (node.open = true) };
}
