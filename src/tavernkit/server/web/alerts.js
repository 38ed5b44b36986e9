// Errors that stay on the screen until the user dismisses them: a failed turn (with Retry),
// an action the server refused, an import that needs a choice. A reload of the screen's data
// never clears them; role="alert" has a screen reader announce each.

import { button, h } from "./dom.js";
import { t } from "./i18n.js";

export function createAlerts() {
  const node = h("div", { class: "alerts" });

  // Show `text`. `retry` is offered as a Retry button; `actions` ({label, run}) as buttons of
  // their own. Each button dismisses the alert, then runs. `info`: a note the user asked for
  // (a command's answer), not an error.
  function show(text, { retry, actions = [], info = false } = {}) {
    const item = h(
      "div",
      { class: info ? "alert info" : "alert", role: info ? "status" : "alert" },
      h("span", { class: "text" }, text),
    );
    const choices = retry ? [{ label: t("Retry"), run: retry }, ...actions] : actions;
    const row = h("span", { class: "row" });
    for (const { label, run } of choices) {
      row.append(
        button(label, () => {
          item.remove();
          run();
        }),
      );
    }
    row.append(button(t("Dismiss"), () => item.remove()));
    item.append(row);
    node.append(item);
    return item;
  }

  return { node, show };
}
