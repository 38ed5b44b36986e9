// Downloads and small dialogs the character screens share: a server export saved as a file
// (fetched first, so a refusal is an error the screen shows, not a page of JSON), and a
// confirmation in a modal <dialog> (focus stays in it; Escape or Cancel says no).

import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";
import { t } from "../i18n.js";

export async function download(path, fallbackName) {
  const response = await api("GET", path, undefined, { raw: true });
  if (!response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch {
      /* not JSON: the status says enough */
    }
    throw new ApiError(response.status, body && (body.error || body));
  }
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: fileName(response) || fallbackName, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}

function fileName(response) {
  const header = response.headers.get("Content-Disposition") || "";
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  if (star) return decodeURIComponent(star[1]);
  const plain = /filename="?([^";]+)"?/i.exec(header);
  return plain ? plain[1] : "";
}

// Ask before something that cannot be undone. `option` ({label}) adds a checkbox; resolves to
// {ok, checked}.
export function confirmDialog(title, text, { confirm = t("Delete"), option = null } = {}) {
  return new Promise((resolve) => {
    const box = option ? h("input", { type: "checkbox" }) : null;
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-label": title },
      h("h2", {}, title),
      h("p", {}, text),
      box ? h("label", { class: "field check" }, box, option.label) : null,
    );
    const finish = (ok) => {
      dialog.close();
      dialog.remove();
      resolve({ ok, checked: Boolean(box && box.checked) });
    };
    dialog.append(
      h(
        "div",
        { class: "row" },
        button(confirm, () => finish(true), { class: "danger" }),
        button(t("Cancel"), () => finish(false)),
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("button:last-child").focus();
  });
}

// A visible word with the thing it acts on for screen readers: "Rename" reads "Rename <chat>".
export function named(visible, hidden) {
  return [visible, h("span", { class: "visually-hidden" }, ` ${hidden}`)];
}
