// Settings > Language: the UI's language on this browser (English, 简体中文, 繁體中文). Each
// language is named in itself, so a user who cannot read the current one still finds theirs.

import { h } from "../dom.js";
import { chooseLanguage, language, LANGUAGES, t } from "../i18n.js";

export function languageSection() {
  const select = h(
    "select",
    {},
    Object.entries(LANGUAGES).map(([code, name]) =>
      h("option", { value: code, lang: code, selected: code === language() }, name),
    ),
  );
  select.addEventListener("change", () => chooseLanguage(select.value));
  return h(
    "section",
    { class: "card", "aria-label": t("Language") },
    h("h2", {}, t("Language")),
    h("label", { class: "field" }, t("Language of the interface"), select),
    h("p", { class: "muted" }, t("Kept in this browser. Until one is chosen, the browser's language decides.")),
  );
}
