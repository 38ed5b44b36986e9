// The chat screen's persona picker: who the next turn speaks as (sent with each turn as its
// persona). The browser remembers the last pick; a persona locked to the chat, else to its
// character, is preselected over it (SillyTavern: chat lock > character lock > default), and
// the line under the picker says what was chosen and why. Lock or unlock the pick to this
// chat or to the character right here; "Manage personas" edits them.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";

const PERSONA_KEY = "tavernkit.persona";

export async function createPersonaPicker(chat, onChange) {
  const chatUrl = `/chats/${encodeURIComponent(chat.id)}/persona`;
  const select = h("select", { "aria-label": "Persona" }, h("option", { value: "" }, "Default persona"));
  const note = h("p", { class: "persona-note muted", role: "status" });
  const actions = h("div", { class: "row" });
  const alerts = createAlerts();
  const manage = h("a", { href: `#/personas?${new URLSearchParams({ chat: chat.id })}` }, "Manage personas");
  let locks = { chat: null, character: null, default: null };
  let byName = new Map();

  const lock = () => locks.chat || locks.character;
  const remembered = () => localStorage.getItem(PERSONA_KEY) || "";

  function explain() {
    const picked = select.value;
    const held = lock();
    const where = locks.chat ? "this chat" : chat.character_name || "the character";
    if (held && picked === held.name) {
      const mine = remembered();
      const over = mine && mine !== held.name && byName.has(mine) ? ` (over your last pick, ${mine})` : "";
      note.textContent = `Speaking as ${held.name}: locked to ${where}${over}.`;
    } else if (held) {
      note.textContent = picked
        ? `Speaking as ${picked} for now; ${where} is locked to ${held.name}.`
        : `Speaking as ${held.name}: locked to ${where}.`;
    } else if (picked) {
      note.textContent = `Speaking as ${picked} (your pick).`;
    } else if (locks.default) {
      note.textContent = `Speaking as ${locks.default.name}, the default persona.`;
    } else {
      note.textContent = "No persona: you speak under your user name.";
    }
  }

  function drawActions() {
    const picked = byName.get(select.value);
    const characterName = chat.character_name || "the character";
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
      buttons.push(button("Unlock this chat", run(() => api("PUT", chatUrl, { persona: null }))));
    }
    if (picked && (!locks.chat || locks.chat.id !== picked.id)) {
      buttons.push(
        button(
          "Lock to this chat",
          run(async () => {
            const done = await api("PUT", chatUrl, { persona: picked.id });
            toast(`${picked.name} is locked to this chat`, "info");
            return done;
          }),
        ),
      );
    }
    if (chat.character_id) {
      if (locks.character) {
        buttons.push(
          button(
            `Unlock ${characterName}`,
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
            `Lock to ${characterName}`,
            run(async () => {
              await api("PUT", `/characters/${encodeURIComponent(chat.character_id)}/persona`, { persona: picked.id });
              toast(`${picked.name} is locked to ${characterName}`, "info");
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
    alerts.show(`Personas: ${errorText(error)}`);
  }
  apply();

  const node = h("div", { class: "persona-picker" }, select, note, actions, alerts.node, manage);
  return {
    node,
    persona: () => select.value,
    // Speak as `name` ("" for the default), as if picked in the list (the /persona command).
    setPersona(name) {
      if (name && !byName.has(name)) throw new Error(`no persona named ${name}`);
      select.value = name;
      select.dispatchEvent(new Event("change"));
    },
  };
}
