// The chat side panel's "Quick reply sets": each of the user's Quick Reply sets with where it
// is on the bar — everywhere (global), this chat, this character — as checkboxes. A change is
// saved at once (PUT /settings/quick-replies, /chats/{id}/quick-replies,
// /characters/{ref}/quick-replies) and `changed()` redraws the bar.

import { api } from "../api.js";
import { h } from "../dom.js";
import { reportError } from "../toast.js";
import { t } from "../i18n.js";

export function createQuickReplyBindings(chat, base, changed) {
  const body = h("div", { class: "qr-bindings" });
  const node = h("details", { class: "panel" }, h("summary", {}, t("Quick reply sets")), body);
  let state = { sets: [], global: [], chat: [], character: [] };

  const scopes = [
    ["global", t("Everywhere"), (sets) => api("PUT", "/settings/quick-replies", { sets })],
    [
      "chat",
      t("This chat"),
      (sets) => api("PUT", `${base}/quick-replies`, { sets: sets.map((set) => ({ set, isVisible: true })) }),
    ],
  ];
  if (chat.character_id) {
    const url = `/characters/${encodeURIComponent(chat.character_id)}/quick-replies`;
    scopes.push(["character", chat.character_name || t("This character"), (sets) => api("PUT", url, { sets })]);
  }

  async function toggle(scope, save, name, on) {
    // a list may name a set that is gone (the global Default of a fresh profile): kept out
    const known = new Set(state.sets);
    const names = state[scope].filter((n) => n !== name && (scope === "character" || known.has(n)));
    if (on) names.push(name);
    try {
      await save(names);
      state[scope] = names;
      await changed();
    } catch (error) {
      reportError(error);
      draw();
    }
  }

  function row(name) {
    const boxes = scopes.map(([scope, label, save]) => {
      const box = h("input", { type: "checkbox" });
      box.checked = state[scope].includes(name);
      box.addEventListener("change", () => toggle(scope, save, name, box.checked));
      return h("label", {}, box, ` ${label}`);
    });
    return h("fieldset", { class: "qr-binding" }, h("legend", {}, name), ...boxes);
  }

  function draw() {
    const names = [...new Set([...state.sets, ...state.character])];
    body.replaceChildren(
      ...(names.length
        ? names.map(row)
        : [
            // a web user's way in (the import drop zone), not the command line's
            h(
              "p",
              { class: "hint" },
              t("No Quick Reply sets yet: drop a set's .json file on the "),
              h("a", { href: "#/" }, t("Characters screen")),
              t(" to import it."),
            ),
          ]),
    );
  }

  return {
    node,
    // `bindings`: GET /chats/{id}/quick-replies's
    update(bindings) {
      state = { sets: [], global: [], chat: [], character: [], ...bindings };
      draw();
    },
  };
}
