// The message box and the turn buttons. Enter sends, Shift+Enter is a new line, Escape stops
// the running turn. `on`: {send(text), stop(), turn(kind)}.

import { button, h } from "../dom.js";

export function createComposer(on) {
  const input = h("textarea", {
    rows: 3,
    placeholder: "Type a message (Enter sends, Shift+Enter for a new line)",
    "aria-label": "Message",
  });
  const stop = button("Stop", () => on.stop(), { disabled: true, class: "danger" });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      on.send(input.value);
    } else if (event.key === "Escape") {
      on.stop();
    }
  });
  const node = h(
    "div",
    { class: "composer" },
    input,
    h(
      "div",
      { class: "row" },
      button("Send", () => on.send(input.value), { class: "primary" }),
      stop,
      button("Regenerate", () => on.turn("regenerate")),
      button("Continue", () => on.turn("continue")),
      button("Impersonate", () => on.turn("impersonate")),
    ),
  );
  return {
    node,
    focus: () => input.focus(),
    setText(text) {
      input.value = text;
    },
    running(yes) {
      stop.disabled = !yes;
    },
  };
}
