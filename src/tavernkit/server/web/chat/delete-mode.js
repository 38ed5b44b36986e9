// SillyTavern's delete mode: pick a message, and it and every later one are marked; one
// confirmation deletes them all (one request, however many). `total()` is the chat's length,
// `remove(from)` does the deleting.

import { button, h } from "../dom.js";
import { t } from "../i18n.js";

export function createDeleteMode(list, total, remove) {
  let from = null;
  const hint = h("span", {}, t("Pick the first message to delete: it and every later one go."));
  const confirm = button(t("Delete"), () => done(true), { class: "danger", disabled: true });
  const cancel = button(t("Cancel"), () => done(false));
  const bar = h("div", { class: "delete-bar", role: "group", "aria-label": t("Delete messages") }, hint, confirm, cancel);
  bar.hidden = true;

  function mark() {
    for (const node of list.querySelectorAll(":scope > .message[data-index]")) {
      node.classList.toggle("doomed", from !== null && Number(node.dataset.index) >= from);
    }
  }

  function pick(event) {
    const node = event.target.closest(".message[data-index]");
    if (!node || !list.classList.contains("deleting")) return;
    event.preventDefault();
    event.stopPropagation();
    from = Number(node.dataset.index);
    const count = total() - from;
    confirm.textContent = count === 1 ? t("Delete 1 message") : t("Delete {count} messages", { count });
    confirm.disabled = false;
    mark();
  }
  list.addEventListener("click", pick, true);

  async function done(doIt) {
    const chosen = from;
    from = null;
    list.classList.remove("deleting");
    bar.hidden = true;
    mark();
    if (doIt && chosen !== null) await remove(chosen);
  }

  const start = button(t("Delete messages"), () => {
    from = null;
    confirm.textContent = t("Delete");
    confirm.disabled = true;
    list.classList.add("deleting");
    bar.hidden = false;
  });
  return { bar, start };
}
