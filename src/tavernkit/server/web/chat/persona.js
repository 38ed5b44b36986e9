// The chat screen's persona picker: who the next turn speaks as (sent with each turn as its
// persona). The browser remembers the last pick; a persona locked to the chat, else to its
// character, is preselected over it (SillyTavern: chat lock > character lock > default), and
// the line under the picker says what was chosen and why. Lock or unlock the pick to this
// chat or to the character right here; "Manage personas" edits them.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

const PERSONA_KEY = "tavernkit.persona";

export async function createPersonaPicker(chat, onChange) {
  const chatUrl = `/chats/${encodeURIComponent(chat.id)}/persona`;
  const select = h("select", {}, h("option", { value: "" }, t("Default persona")));
  const note = h("p", { class: "persona-note muted", role: "status" });
  const actions = h("div", { class: "row" });
  const alerts = createAlerts();
  const manage = h("a", { href: `#/personas?${new URLSearchParams({ chat: chat.id })}` }, t("Manage personas"));
  let locks = { chat: null, character: null, default: null };
  let byName = new Map();

  const lock = () => locks.chat || locks.character;
  const remembered = () => localStorage.getItem(PERSONA_KEY) || "";

  function explain() {
    const picked = select.value;
    const held = lock();
    const where = locks.chat ? t("this chat") : chat.character_name || t("the character");
    if (held && picked === held.name) {
      const mine = remembered();
      const over = mine && mine !== held.name && byName.has(mine) ? t(" (over your last pick, {mine})", { mine }) : "";
      note.textContent = t("Speaking as {name}: locked to {where}{over}.", { name: held.name, where, over });
    } else if (held) {
      note.textContent = picked
        ? t("Speaking as {picked} for now; {where} is locked to {name}.", { picked, where, name: held.name })
        : t("Speaking as {name}: locked to {where}.", { name: held.name, where });
    } else if (picked) {
      note.textContent = t("Speaking as {picked} (your pick).", { picked });
    } else if (locks.default) {
      note.textContent = t("Speaking as {name}, the default persona.", { name: locks.default.name });
    } else {
      note.textContent = t("No persona: you speak under your user name.");
    }
  }

  function drawActions() {
    const picked = byName.get(select.value);
    const characterName = chat.character_name || t("the character");
    // a refused lock stays on screen with Retry
    const run = (action) => async () => {
      try {
        locks = await action();
        apply();
      } catch (error) {
        alerts.show(errorText(error), { retry: run(action) });
      }
    };
    const buttons = [];
    if (locks.chat) {
      buttons.push(button(t("Unlock this chat"), run(() => api("PUT", chatUrl, { persona: null }))));
    }
    if (picked && (!locks.chat || locks.chat.id !== picked.id)) {
      buttons.push(
        button(
          t("Lock to this chat"),
          run(async () => {
            const done = await api("PUT", chatUrl, { persona: picked.id });
            toast(t("{name} is locked to this chat", { name: picked.name }), "info");
            return done;
          }),
        ),
      );
    }
    if (chat.character_id) {
      if (locks.character) {
        buttons.push(
          button(
            t("Unlock {characterName}", { characterName }),
            run(async () => {
              await api("PUT", `/characters/${encodeURIComponent(chat.character_id)}/persona`, { persona: null });
              return api("GET", chatUrl);
            }),
          ),
        );
      }
      if (picked && (!locks.character || locks.character.id !== picked.id)) {
        buttons.push(
          button(
            t("Lock to {characterName}", { characterName }),
            run(async () => {
              await api("PUT", `/characters/${encodeURIComponent(chat.character_id)}/persona`, { persona: picked.id });
              toast(t("{name} is locked to {characterName}", { name: picked.name, characterName }), "info");
              return api("GET", chatUrl);
            }),
          ),
        );
      }
    }
    actions.replaceChildren(...buttons);
  }

  // The lock's persona when there is one, else the browser's last pick (when it still exists).
  function apply() {
    const held = lock();
    const mine = remembered();
    select.value = held && byName.has(held.name) ? held.name : byName.has(mine) ? mine : "";
    refresh();
  }

  function refresh() {
    explain();
    drawActions();
    onChange(select.value);
  }

  select.addEventListener("change", () => {
    localStorage.setItem(PERSONA_KEY, select.value);
    refresh();
  });

  try {
    const [page, current] = await Promise.all([api("GET", "/personas?limit=500"), api("GET", chatUrl)]);
    byName = new Map(page.items.map((p) => [p.name, p]));
    for (const persona of page.items) select.append(h("option", { value: persona.name }, persona.name));
    locks = current;
  } catch (error) {
    alerts.show(t("Personas: {value}", { value: errorText(error) }));
  }
  apply();

  // named by a visible label (an aria-label alone left a bare list with no word of what it is)
  const picker = h("label", { class: "field" }, h("span", { class: "label" }, t("Persona")), select);
  const node = h("div", { class: "persona-picker" }, picker, note, actions, alerts.node, manage);
  return {
    node,
    persona: () => select.value,
    // Speak as `name` ("" for the default), as if picked in the list (the /persona command).
    setPersona(name) {
      if (name && !byName.has(name)) throw new Error(t("no persona named {name}", { name }));
      select.value = name;
      select.dispatchEvent(new Event("change"));
    },
  };
}
