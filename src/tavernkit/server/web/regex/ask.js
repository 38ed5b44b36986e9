// SillyTavern's question when a card with its own regex scripts is opened: they stay off
// until allowed. Asked once per character in this browser (the answer "Not now" is kept);
// the regex screen changes it any time.

import { api } from "../api.js";
import { toast } from "../toast.js";
import { t } from "../i18n.js";

const ASKED = "tavernkit.regex.asked";

function asked() {
  try {
    return new Set(JSON.parse(localStorage.getItem(ASKED) || "[]"));
  } catch {
    return new Set();
  }
}

function remember(id) {
  const seen = asked();
  seen.add(id);
  localStorage.setItem(ASKED, JSON.stringify([...seen]));
}

// `alerts`: the screen's (createAlerts); `changed()` runs once the scripts are allowed.
export async function askCardScripts(characterId, alerts, changed) {
  if (asked().has(characterId)) return;
  let found;
  try {
    found = await api("GET", `/regex/characters/${encodeURIComponent(characterId)}`);
  } catch {
    return; // a question, not the chat: it can wait for the regex screen
  }
  if (found.allowed || !found.scripts.length) return;
  alerts.show(`${found.name}: ${found.question}`, {
    info: true,
    actions: [
      {
        label: t("Allow"),
        run: async () => {
          remember(characterId);
          try {
            await api("PUT", `/regex/characters/${encodeURIComponent(characterId)}/allowed`, { allowed: true });
            toast(t("{name}'s regex scripts run now", { name: found.name }), "info");
            changed();
          } catch (error) {
            toast(String(error.message || error));
          }
        },
      },
      { label: t("Not now"), run: () => remember(characterId) },
    ],
  });
}
