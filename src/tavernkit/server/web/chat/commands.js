// Slash commands typed in the composer: the terminal chat's commands (tavernkit chat's /help),
// each one API call through the screen's own actions, so a command does exactly what its
// button does. Quick replies whose lines are all commands run through here too. A line whose
// command is not one of these is an STscript (SillyTavern's slash commands): the screen sends
// the whole text to POST /chats/{id}/script (isOwnCommand tells which).
// `act`: the chat screen's actions (see screen.js).

import { t } from "../i18n.js";

const HELP = [
  ["/swipe [N|back]", t("new alternative; N shows swipe N, back the previous")],
  ["/regen", t("replace the last reply")],
  ["/continue", t("extend the last reply")],
  ["/impersonate", t("write your next message for you")],
  ["/prefill [TEXT]", t("start the next reply with TEXT (none: off)")],
  ["/stop", t("stop the reply being generated")],
  ["/edit [N] TEXT", t("replace message N's text (default: the last)")],
  ["/delete N", t("delete message N")],
  ["/hide N", t("hide message N from the prompt")],
  ["/unhide N", t("show message N to the prompt again")],
  ["/branch [N]", t("continue in a new chat holding messages 0..N")],
  ["/persona [NAME|off]", t("speak as persona NAME")],
  ["/rename NAME", t("rename this chat")],
  ["/qr LABEL", t("run a quick reply")],
  ["/prompt", t("open the prompt inspector")],
  ["/help", t("this list")],
  ["/… | /…", t("anything else: an STscript (/echo, /setvar, /gen, /sendas, /run …)")],
];

export class CommandError extends Error {}

function index(arg, act, { optional = false } = {}) {
  if (!arg) {
    if (optional) return act.count() - 1;
    throw new CommandError(t("a message number is needed"));
  }
  if (!/^\d+$/.test(arg)) throw new CommandError(t("{arg} is not a message number", { arg }));
  const n = Number(arg);
  if (n >= act.count()) throw new CommandError(t("no message #{n}; the chat has #0 to #{value}", { n, value: act.count() - 1 }));
  return n;
}

const COMMANDS = {
  swipe: (arg, act) => {
    if (!arg) return act.turn("swipe");
    const count = act.swipeCount();
    if (arg === "back") {
      if (act.swipeAt() === 0) throw new CommandError(t("this is the first swipe"));
      return act.swipeTo(act.swipeAt() - 1);
    }
    if (!/^\d+$/.test(arg) || Number(arg) < 1) throw new CommandError("/swipe takes a swipe number (1 is the first) or back");
    if (Number(arg) > count) throw new CommandError(t("no swipe {arg}; the last reply has {count}", { arg, count }));
    return act.swipeTo(Number(arg) - 1);
  },
  regen: (_, act) => act.turn("regenerate"),
  regenerate: (_, act) => act.turn("regenerate"),
  continue: (_, act) => act.turn("continue"),
  impersonate: (_, act) => act.turn("impersonate"),
  prefill: (arg, act) => act.setPrefill(arg),
  stop: (_, act) => act.stop(),
  edit: (arg, act) => {
    const [first, ...rest] = arg.split(" ");
    const numbered = /^\d+$/.test(first) && rest.length;
    const text = numbered ? rest.join(" ") : arg;
    if (!text.trim()) throw new CommandError("/edit needs the new text");
    return act.edit(index(numbered ? first : "", act, { optional: true }), text);
  },
  delete: (arg, act) => act.remove(index(arg, act)),
  hide: (arg, act) => act.hide(index(arg, act), true),
  unhide: (arg, act) => act.hide(index(arg, act), false),
  branch: (arg, act) => act.branch(index(arg, act, { optional: true })),
  persona: (arg, act) => act.persona(arg === "off" ? "" : arg),
  rename: (arg, act) => {
    if (!arg) throw new CommandError("/rename needs the chat's new name");
    return act.rename(arg);
  },
  qr: (arg, act) => {
    if (!arg) throw new CommandError("/qr needs a quick reply's label");
    return act.quickReply(arg);
  },
  prompt: (_, act) => act.inspect(),
  help: (_, act) => act.info(HELP.map(([usage, what]) => `${usage}: ${what}`).join("\n")),
};

const nameOf = (line) => (/^\/(\S*)/.exec(line.trim()) || [])[1] || "";

// Whether the text's first command is one of the composer's own (else it is an STscript).
export function isOwnCommand(text) {
  return Object.hasOwn(COMMANDS, nameOf(text).toLowerCase());
}

// Run one line (it starts with "/"); a bad command or argument throws CommandError.
export async function runCommand(line, act) {
  const [, name = "", arg = ""] = /^\/(\S*)\s*([\s\S]*)$/.exec(line.trim()) || [];
  const command = COMMANDS[name.toLowerCase()];
  if (!command) throw new CommandError(t("unknown command /{name}; /help lists them", { name }));
  await command(arg.trim(), act);
}
