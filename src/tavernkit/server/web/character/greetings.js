// A list of greetings (a card's alternate greetings, or its V3 group-only ones): each a text
// box, moved up or down, removed; "Add" appends one and puts focus in it. `read()` gives the
// texts in their order (empty ones too: a card may keep an empty greeting on purpose).

import { button, h } from "../dom.js";
import { t } from "../i18n.js";

let uniqueId = 0;

export function createGreetings(texts, { label, noun }) {
  const list = h("ol", { class: "greetings" });
  let areas = [];

  function render() {
    list.replaceChildren(
      ...areas.map((area, i) => {
        const n = i + 1;
        area.id = area.id || `greeting-${++uniqueId}`;
        return h(
          "li",
          { class: "greeting" },
          h("label", { for: area.id, class: "label" }, `${noun} ${n}`),
          area,
          h(
            "span",
            { class: "row" },
            button("↑", () => move(i, -1), { "aria-label": t("Move {noun} {n} up", { noun: noun.toLowerCase(), n }), disabled: i === 0 }),
            button("↓", () => move(i, 1), {
              "aria-label": t("Move {noun} {n} down", { noun: noun.toLowerCase(), n }),
              disabled: i === areas.length - 1,
            }),
            button("✕", () => remove(i), { "aria-label": t("Remove {noun} {n}", { noun: noun.toLowerCase(), n }), class: "danger" }),
          ),
        );
      }),
    );
  }

  function textArea(text) {
    const area = h("textarea", { rows: 3 });
    area.value = text;
    return area;
  }

  function move(i, delta) {
    const j = i + delta;
    [areas[i], areas[j]] = [areas[j], areas[i]];
    render();
    list.querySelectorAll("textarea")[j].focus();
  }

  function remove(i) {
    areas.splice(i, 1);
    render();
    const next = list.querySelectorAll("textarea")[Math.min(i, areas.length - 1)];
    if (next) next.focus();
    else add.focus();
  }

  const add = button(t("Add {noun}", { noun: noun.toLowerCase() }), () => {
    areas.push(textArea(""));
    render();
    areas[areas.length - 1].focus();
  });

  areas = (texts || []).map((t) => textArea(String(t ?? "")));
  render();
  const node = h("fieldset", { class: "greetings-box" }, h("legend", {}, label), list, add);
  return { node, read: () => areas.map((a) => a.value), areas: () => areas };
}
