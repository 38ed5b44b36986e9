// The quick-reply bar over the composer: the buttons of the stored "Default" Quick Reply set
// (SillyTavern's format; `tavernkit chat`'s /qr add saves to it). A reply whose lines are all
// slash commands runs them in order; any other reply is sent as the user's message.

import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";

const SET = "Default";

// The lines to run for a reply: [true, commands] when every line is a command, else
// [false, [text]] (the same rule as the terminal chat).
export function replyLines(message) {
  const lines = message.split("\n").map((line) => line.trim()).filter(Boolean);
  if (lines.length && lines.every((line) => line.startsWith("/"))) return [true, lines];
  return [false, message.trim() ? [message.trim()] : []];
}

export async function createQuickReplies(run) {
  let replies = [];
  const bar = h("div", { class: "quick-replies", role: "toolbar", "aria-label": "Quick replies" });
  try {
    const set = await api("GET", `/quick-replies/${SET}`);
    replies = (set.data && set.data.qrList) || (set.data && set.data.qr_list) || [];
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }
  for (const reply of replies) {
    if (reply.label) bar.append(button(reply.label, () => run(reply), { title: reply.message }));
  }
  bar.hidden = !bar.childElementCount;
  return {
    node: bar,
    find: (label) => replies.find((reply) => reply.label === label) || null,
  };
}
