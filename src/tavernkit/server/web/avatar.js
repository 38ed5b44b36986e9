// A round picture beside a name: a character's or persona's thumbnail, or the name's initial
// when there is no image (or it fails to load). Decorative: the name is always shown beside it.

import { h } from "./dom.js";

export function avatar(url, name, extra = "") {
  const initial = h("span", { class: `avatar initial ${extra}`.trim(), "aria-hidden": "true" }, (name || "?").slice(0, 1));
  if (!url) return initial;
  const image = h("img", { class: `avatar ${extra}`.trim(), src: url, alt: "", loading: "lazy", width: 36, height: 36 });
  image.addEventListener("error", () => image.replaceWith(initial));
  return image;
}

