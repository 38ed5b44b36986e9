// What the personas screen's parts share: SillyTavern's persona description positions and a
// persona's avatar (its initial when it has none).

import { h } from "../dom.js";
import { t } from "../i18n.js";

export const POSITIONS = [
  [0, t("In the prompt (story string / prompt manager)")],
  [2, t("Top of the author's note")],
  [3, t("Bottom of the author's note")],
  [4, t("In chat at a depth")],
  [9, t("Nowhere (off)")],
];

// The persona's avatar, or its initial when it has none (the image answers 404); `missing`
// runs then.
export function avatar(persona, size = "small", missing = () => {}) {
  const initial = () => h("span", { class: `persona-avatar ${size} initial`, "aria-hidden": "true" }, (persona.name || "?").slice(0, 1));
  if (!persona.id) {
    missing();
    return initial();
  }
  const image = h("img", {
    class: `persona-avatar ${size}`,
    src: `/personas/${encodeURIComponent(persona.id)}/avatar?v=${encodeURIComponent(persona.updated || "")}`,
    alt: "",
  });
  image.addEventListener("error", () => {
    image.replaceWith(initial());
    missing();
  });
  return image;
}

// A control under its visible label; the control is named by that text alone (a select's
// name would otherwise take in its chosen option's text).
export function field(label, control, className = "field") {
  control.setAttribute("aria-label", label);
  return className.includes("check") ? h("label", { class: className }, control, label) : h("label", { class: className }, label, control);
}
