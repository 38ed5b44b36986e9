// What the chat screen runs by itself once, as SillyTavern's Quick Reply extension does: the
// replies flagged "execute on startup" when the page starts (on the first chat it opens: a
// script needs a chat to run on), and those flagged "execute on new chat" on a chat this page
// has just created (createChat marks it; its screen asks isNew once).

import { api } from "../api.js";

let startedUp = false;
const created = new Set();

// A character's new chat (POST /chats), remembered as new for its screen.
export async function createChat(body) {
  const chat = await api("POST", "/chats", body);
  created.add(chat.id);
  return chat;
}

// True the first time this page load asks, false afterwards.
export function firstStart() {
  const first = !startedUp;
  startedUp = true;
  return first;
}

// True once for a chat createChat made in this page load.
export function isNew(chatId) {
  return created.delete(chatId);
}
