// "Test this text": every entry of the book as saved, scanned against a text as a chat's one
// message: whether it fires, why, where it goes and its tokens.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText } from "../toast.js";
import { t } from "../i18n.js";

export function createTester(book, alerts) {
  const sample = h("textarea", { rows: 3 });
  const results = h("table", { class: "lore-test" });

  async function test() {
    try {
      const rows = await api("POST", `/ui/lorebooks/${encodeURIComponent(book.id)}/test`, {
        text: sample.value,
        seed: 1,
      });
      results.replaceChildren(
        h("thead", {}, h("tr", {}, [t("Entry"), t("Fires"), t("Why"), t("Position"), t("Tokens")].map((t) => h("th", {}, t)))),
        h(
          "tbody",
          {},
          rows.map((r) =>
            h(
              "tr",
              { class: r.fired ? "fired" : "", dataset: { uid: r.uid } },
              h("td", {}, r.comment || r.key || String(r.uid)),
              h("td", {}, r.fired ? t("yes") : t("no")),
              h("td", {}, r.why || ""),
              h("td", {}, r.position_label || ""),
              h("td", { class: "num" }, String(r.tokens)),
            ),
          ),
        ),
      );
    } catch (error) {
      alerts.show(errorText(error), { retry: test });
    }
  }

  return h(
    "section",
    { class: "card tester", "aria-label": t("Test this text") },
    h("h2", {}, t("Test this text")),
    h("p", { class: "muted" }, t("Scans the book as saved, as if the text were the chat's last message.")),
    h("label", { class: "field" }, t("Text to test"), sample),
    h("div", { class: "row" }, button(t("Test this text"), test)),
    h("div", { class: "table-wrap" }, results),
  );
}
