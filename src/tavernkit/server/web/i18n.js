// The UI's languages: English, 简体中文 and 繁體中文. Every text a user sees is written in English
// in the code and passed through t(): the English is the catalogue key (gettext style), so
// t("Save persona") or t("{name} is the default persona", { name }). The catalogues are
// i18n/<language>.json (English maps each text to itself).
//
// The language is the one chosen in Settings (kept in this browser's localStorage, like the
// theme: it is how this device shows the UI, not a setting of the account's chats), else the
// browser's first Chinese or English language. The catalogue loads here, at the top level, so
// every module that imports t() runs after it: the first screen is drawn in its language.
// Changing the language reloads the page (texts built when a module loaded change too).

export const LANGUAGES = { en: "English", "zh-Hans": "简体中文", "zh-Hant": "繁體中文" };

const STORED = "tavernkit.language";

// A BCP 47 tag -> one of LANGUAGES, or null when the UI has no catalogue for it.
export function languageOf(tag) {
  const lower = String(tag).toLowerCase();
  if (lower === "en" || lower.startsWith("en-")) return "en";
  if (lower !== "zh" && !lower.startsWith("zh-")) return null;
  if (/-(hant|tw|hk|mo)(-|$)/.test(lower)) return "zh-Hant";
  return "zh-Hans"; // zh, zh-CN, zh-SG, zh-Hans...
}

function chosenLanguage() {
  const stored = localStorage.getItem(STORED);
  if (stored && stored in LANGUAGES) return stored;
  for (const tag of navigator.languages || [navigator.language]) {
    const language = languageOf(tag);
    if (language) return language;
  }
  return "en";
}

let current = "en";
let catalogue = {};

async function load(language) {
  if (language === "en") return {};
  try {
    const response = await fetch(`/ui/i18n/${language}.json`);
    if (response.ok) return await response.json();
  } catch {
    // offline with no cached catalogue: the UI still works, in English
  }
  return null;
}

export function language() {
  return current;
}

// `text` in the UI's language, its {placeholders} filled from `values`.
export function t(text, values = {}) {
  const template = catalogue[text] || text;
  return template.replace(/\{(\w+)\}/g, (whole, key) => (key in values ? String(values[key]) : whole));
}

// Store the choice and draw the UI again in it.
export function chooseLanguage(language) {
  if (!(language in LANGUAGES)) throw new Error(`no UI language ${language}`);
  localStorage.setItem(STORED, language);
  window.location.reload();
}

// The page's own texts (index.html's nav) carry data-i18n: translated once, when it loads.
function translatePage() {
  for (const node of document.querySelectorAll("[data-i18n]")) {
    node.textContent = t(node.textContent.trim());
  }
}

const wanted = chosenLanguage();
const loaded = await load(wanted);
if (loaded !== null) {
  current = wanted;
  catalogue = loaded;
}
document.documentElement.lang = current;
translatePage();
