// The chat screen: the message log (chat/log.js), the live reply of a running turn
// (chat/live.js), errors that stay until dismissed (alerts.js), the composer
// (chat/composer.js) and the side panel (chat/side.js); a group chat's parts (chat/group.js).
// This file owns the screen's state (the running turn) and the actions on messages: edit,
// branch, delete, swipe.

import { ApiError, api, isStale, rememberedTurn } from "../api.js";
import { button, h } from "../dom.js";
import { render } from "../markdown.js";
import { avatar } from "../avatar.js";
import { errorText } from "../toast.js";
import { createAlerts } from "../alerts.js";
import { askCardScripts } from "../regex/ask.js";
import { CommandError, isOwnCommand, runCommand } from "./commands.js";
import { createComposer } from "./composer.js";
import { createDeleteMode } from "./delete-mode.js";
import { openGroup } from "./group.js";
import { followTurn } from "./live.js";
import { createLog } from "./log.js";
import { messageNode, textOf } from "./message.js";
import { createQuickReplyBindings } from "./qr-bindings.js";
import { firstStart, isNew } from "./auto-run.js";
import { resumeAsking, runAsking } from "./questions.js";
import { clickText, createQuickReplies, menuMessage, replyLines } from "./quick-replies.js";
import { createSide } from "./side.js";
import { t } from "../i18n.js";
import { createTree } from "./tree.js";

// Whether trying again could help: not for a request the server refused as it is (4xx), but
// for a busy chat, a rate limit, a server error or a dropped connection.
function retryable(error) {
  if (!(error instanceof ApiError)) return true;
  return error.status >= 500 || error.status === 429 || (error.body && error.body.type === "ChatBusy");
}

// `at`: a message index to open the chat at (a search result), else the newest.
export async function showChat(view, chatId, at = null) {
  const chat = await api("GET", `/chats/${encodeURIComponent(chatId)}`);
  const base = `/chats/${encodeURIComponent(chat.id)}`;
  let stream = null; // the watched turn: {close, url}
  let turnId = null;
  let prefill = ""; // /prefill: what every reply starts with, until turned off
  // which automatic quick replies the running turn sets off when it completes; a turn a
  // quick reply started sets off none unless the reply allows it (preventAutoExecute off)
  let turnTriggers = { user: false, ai: false };
  let nextTurnQuiet = false;

  // a chat with no character of its own may be a group's
  const group = chat.character_id ? null : await openGroup(chat, base);
  const alerts = createAlerts();
  const fail = (error, retry) => alerts.show(errorText(error), retryable(error) ? { retry } : {});
  const actions = {
    edit: editMessage,
    branch: branchAt,
    remove: deleteMessage,
    hide: (message, hidden) =>
      checked(message, () => api("PUT", `${base}/messages/${message.index}/hidden`, { hidden }, { ifMatch: message.revision })),
    pickSwipe,
    swipe: () => startTurn("swipe"),
    // the chat's tree (chat/tree.js): a mid-chat reply regenerated on a new branch (in a
    // group chat, the member who wrote it speaks again)
    regenerateAt: (index) => startTurn("regenerate", "", [], { at: index }),
  };
  // null when the character has no picture (a JSON card): its initial, and no request
  const characterAvatar = chat.character_thumbnail_url || "";
  // a solo chat's messages show the character's picture (a user's, the name's initial)
  const withAvatar = (node, message) => {
    const name = node.querySelector(".meta .name");
    const data = message.data;
    if (name) name.before(avatar(data.is_user ? "" : characterAvatar, data.name));
    node.classList.add("speaker");
    return node;
  };
  const log = createLog(base, (message, isLast) => {
    const node = messageNode(message, isLast, actions);
    return tree.decorate(group ? group.decorate(node, message) : withAvatar(node, message));
  });
  const composer = createComposer({ send, stop: stopTurn, turn: (kind) => startTurn(kind) });
  // the message box names the persona spoken as (on a phone the side panel that shows the
  // pick is closed)
  const side = await createSide(group ? { ...chat, character_name: group.group.name } : chat, base, composer.speakingAs);
  // a switch of path redraws the log from its end (on a phone, the tools close to show it)
  const onSwitch = () => {
    side.node.classList.remove("open");
    return log.showNewest();
  };
  const tree = createTree(base, { onSwitch, fail, list: () => log.list });
  side.node.append(tree.node);
  tree.load().catch((error) => fail(error, () => tree.load()));
  if (group) {
    side.node.append(group.panel);
    const start = (kind, text, extra) => startTurn(kind, text, [], extra);
    group.attach({ start, busy: () => turnId !== null }, composer);
  }

  // -- actions on messages -----------------------------------------------------------------

  async function attempt(action) {
    try {
      await action();
      await log.reload();
      await tree.load();
    } catch (error) {
      fail(error, () => attempt(action));
    }
  }

  function pickSwipe(message, swipe) {
    return checked(message, () => api("PUT", `${base}/messages/${message.index}/swipe`, { swipe }, { ifMatch: message.revision }));
  }

  // A change sent with the revision the message was shown at: refused when another tab or
  // device changed the message since (the alert offers a reload), otherwise as attempt().
  async function checked(message, action) {
    try {
      await action();
      await log.reload();
    } catch (error) {
      if (isStale(error)) refuseStale(message, "changed");
      else fail(error, () => checked(message, action));
    }
  }

  // The edit sends the revision the message was read at: when another tab or device changed
  // it since, the server refuses (409 StaleRevision) and nothing is overwritten; the editor
  // stays open with the user's text, and the alert offers to reload the message.
  function editMessage(message, body) {
    const area = h("textarea", { rows: 5, "aria-label": t("Edit message") });
    area.value = textOf(message.data.mes);
    const save = async () => {
      try {
        const url = `${base}/messages/${message.index}`;
        await api("PATCH", url, { text: area.value }, { ifMatch: message.revision });
        await log.reload();
      } catch (error) {
        if (isStale(error)) {
          refuseStale(message);
        } else {
          fail(error, save);
        }
      }
    };
    const cancel = () => attempt(async () => {});
    // a message of the user's before the end: send the edited text on a new branch (the chat's
    // tree keeps the old message and what followed it)
    const resend =
      message.data.is_user && message.index > 0 && message.index < log.total() - 1
        ? button(t("Send as new branch"), () => startTurn("send", area.value, [], { at: message.index }))
        : null;
    body.replaceChildren(area, h("div", { class: "row" }, button(t("Save"), save), resend, button(t("Cancel"), cancel)));
    area.focus();
  }

  // `what`: "saved" (an edit: the editor keeps the user's text), "deleted" or "changed"
  function refuseStale(message, what = "saved") {
    const text =
      what === "saved"
        ? t("Message #{index} was changed in another tab or device, so your edit was not saved. Reload to see the current text (copy yours first to keep it).", { index: message.index })
        : what === "deleted"
          ? t("Message #{index} was changed in another tab or device, so it was not deleted. Reload to see the chat as it is now.", { index: message.index })
          : t("Message #{index} was changed in another tab or device, so it was not changed. Reload to see the chat as it is now.", { index: message.index });
    alerts.show(text, { actions: [{ label: t("Reload message"), run: () => log.reload() }] });
  }

  function deleteMessage(message) {
    if (!window.confirm(t("Delete message {value}?", { value: message.index + 1 }))) return undefined;
    return removeMessage(message);
  }

  // The delete names the revision the message was shown at, so a list another tab changed
  // never loses the message that moved into this one's place.
  async function removeMessage(message) {
    try {
      await api("DELETE", `${base}/messages/${message.index}`, undefined, { ifMatch: message.revision });
      await log.reload();
      await tree.load();
    } catch (error) {
      if (isStale(error)) refuseStale(message, "deleted");
      else fail(error, () => removeMessage(message));
    }
  }

  async function branchAt(index) {
    try {
      const branch = await api("POST", `${base}/branch`, { message_index: index });
      window.location.hash = `#/chat/${encodeURIComponent(branch.id)}`;
    } catch (error) {
      fail(error, () => branchAt(index));
    }
  }

  // -- turns -------------------------------------------------------------------------------

  // `extra`: a group turn's {member} (who replies) or {auto} (an auto-mode tick)
  async function startTurn(kind, text = "", attachments = [], extra = {}) {
    const persona = side.persona();
    const body = { kind, text, ...extra, ...(persona ? { overrides: { persona } } : {}) };
    if (attachments.length) body.attachments = attachments;
    if (prefill && kind !== "impersonate" && kind !== "continue") body.prefill = prefill;
    const triggers = !nextTurnQuiet;
    nextTurnQuiet = false;
    try {
      const started = await api("POST", group ? group.turnsUrl : `${base}/turns`, body);
      turnTriggers = { user: triggers && kind === "send" && Boolean(text), ai: triggers && kind !== "impersonate" };
      if (extra.at != null) showBranchStart(extra.at, kind === "send" ? text : "");
      follow(started.events, kind, false, extra);
      return true;
    } catch (error) {
      // a refused send stored nothing: its retry sends the text again
      fail(error, () =>
        kind === "send" && (text || attachments.length) && extra.at == null
          ? send(text, attachments)
          : startTurn(kind, extra.at == null ? "" : text, extra.at == null ? [] : attachments, extra),
      );
      return false;
    }
  }

  // A turn on a new branch from message `at`: the old messages from `at` on leave the log
  // (they stay in the chat tree) and the resent text, if any, shows where they were.
  function showBranchStart(at, text) {
    for (const node of log.list.querySelectorAll(":scope > .message")) {
      if (Number(node.dataset.index) >= at) node.hidden = true;
    }
    if (!text) return;
    const name = side.persona() || "You";
    const pending = h("li", { class: "message user pending" }, h("div", { class: "meta" }, h("span", { class: "name" }, name)), h("div", { class: "body" }, render(text)));
    log.appendExtra(pending);
  }

  function follow(eventsUrl, kind, resumed, extra = {}) {
    if (stream) stream.close();
    turnId = eventsUrl.split("/turns/")[1].split("/")[0];
    composer.running(true);
    // a failed send stored the user's message: its retry asks for the reply alone
    const retry = () => startTurn(kind === "send" ? "send" : kind, "", [], extra);
    stream = followTurn({ chat, eventsUrl, kind, log, alerts, composer, retry, resumed, onEnd: finish, group });
  }

  async function finish(streamed, outcome) {
    stream = null;
    turnId = null;
    composer.running(false);
    if (group) group.turnEnded(outcome);
    log.list.dataset.streamed = streamed; // the reply as it streamed (before the stored one is read)
    try {
      await log.reload();
      await tree.load();
    } catch (error) {
      fail(error, () => log.reload());
    }
    log.list.dataset.turns = Number(log.list.dataset.turns) + 1;
    const triggers = turnTriggers;
    turnTriggers = { user: false, ai: false };
    if (!outcome || outcome.status !== "completed") return;
    if (triggers.user) await runAutomatic("executeOnUser");
    if (triggers.ai) await runAutomatic("executeOnAi");
  }

  async function stopTurn() {
    if (group) group.stopAuto();
    if (!turnId) return;
    try {
      await api("DELETE", `${base}/turns/${turnId}`);
    } catch (error) {
      fail(error, stopTurn);
    }
  }

  // The user's message shows at once, above the reply that will stream after it.
  async function send(text, images = []) {
    if (!text.trim() && !images.length) {
      if (group) await startTurn("send"); // a group's members go on among themselves
      return;
    }
    if (text.trim().startsWith("/") && !images.length) {
      composer.setText("");
      if (!isOwnCommand(text)) {
        await runScript(text);
        return;
      }
      await runLines(text.split("\n").filter((line) => line.trim()), text);
      return;
    }
    const name = side.persona() || t("You");
    const body = h("div", { class: "body" }, render(text));
    for (const url of images) body.append(h("img", { class: "attachment", src: url, alt: t("attached image") }));
    const pending = h(
      "li",
      { class: "message user pending" },
      h("div", { class: "meta" }, h("span", { class: "name" }, name)),
      body,
    );
    log.appendExtra(pending);
    composer.setText("");
    composer.setImages([]);
    if (!(await startTurn("send", text, images))) {
      pending.remove();
      composer.setText(text);
      composer.setImages(images);
    }
  }

  // -- slash commands and quick replies ----------------------------------------------------

  const last = () => log.lastMessage();
  const commandActions = {
    count: () => log.total(),
    turn: (kind) => startTurn(kind),
    stop: stopTurn,
    swipeCount: () => (last() && !last().data.is_user ? (last().data.swipes || []).length : 0),
    swipeAt: () => (last() ? (last().data.swipe_id ?? 0) : 0),
    swipeTo: (n) => pickSwipe(last(), n),
    setPrefill(text) {
      prefill = text;
      alerts.show(text ? t("Replies start with: {text}", { text }) : t("Prefill off"), { info: true });
    },
    edit: (i, text) => attempt(() => api("PATCH", `${base}/messages/${i}`, { text })),
    remove: (i) => attempt(() => api("DELETE", `${base}/messages/${i}`)),
    hide: (i, hidden) => attempt(() => api("PUT", `${base}/messages/${i}/hidden`, { hidden })),
    branch: branchAt,
    persona: (name) => side.setPersona(name),
    rename: (name) => attempt(() => api("PATCH", base, { name })),
    quickReply: (label) => {
      const found = quickReplies.find(label);
      if (!found) throw new CommandError(t("no quick reply {label}", { label }));
      return runReply(...found);
    },
    inspect: () => {
      window.location.hash = `#/inspect/${encodeURIComponent(chat.id)}`;
    },
    info: (text) => alerts.show(text, { info: true }),
  };

  // An STscript runs on the server, as this user, on this chat; its toasts, result and error
  // show as alerts, the messages it changed by reloading the log. A failed script's text comes
  // back into the composer to be fixed; a script that set the input box (/setinput) fills it.
  // A script that asks (/input, /popup, /buttons) shows each question in a dialog.
  async function runScript(text) {
    const start = () => api("POST", `${base}/script`, { script: text, interactive: true });
    await scriptDone(() => runAsking(base, start), text, true);
  }

  // `text`: the script typed (back into the composer when it fails); `showPipe`: show its
  // result (a typed script's; a quick reply's, as in SillyTavern, is not shown)
  async function scriptDone(call, text, showPipe) {
    try {
      const out = await call();
      for (const toast of out.toasts) {
        const message = toast.title ? `${toast.title}: ${toast.message}` : toast.message;
        alerts.show(message, { info: toast.type !== "error" && toast.type !== "warning" });
      }
      if (out.error) {
        const { name, message, line, column } = out.error;
        alerts.show(t("{name}: {message} (line {value}, column {value2})", { name, message, value: line + 1, value2: column + 1 }));
        if (text) composer.setText(text);
      } else if (out.pipe && showPipe) {
        alerts.show(out.pipe, { info: true });
      }
      if (!out.error && out.input) composer.setText(out.input);
    } catch (error) {
      alerts.show(errorText(error));
      if (text) composer.setText(text);
    }
    await log.reload();
    await loadQuickReplies(); // a script may have changed the sets or their bindings
  }

  // Run command lines in order; the first that fails stops the rest and says why (the typed
  // text goes back into the composer to be fixed).
  async function runLines(lines, typed = "") {
    for (const line of lines) {
      try {
        await runCommand(line, commandActions);
      } catch (error) {
        alerts.show(error instanceof CommandError ? `${line.split(" ")[0]}: ${error.message}` : errorText(error));
        if (typed) composer.setText(typed);
        return;
      }
    }
  }

  // A Quick Reply button, as SillyTavern's (chat/quick-replies.js clickText): a reply of the
  // composer's own commands (one a line) runs them here; a text to send is sent as a typed
  // message (its reply streams); a script, or a text the set only puts in the box
  // (disableSend), goes to the server's click, which runs it on this chat. `auto`: an
  // automatic execution (no typed text joined). `parent`: {set, reply} whose context menu
  // the reply was picked from (a chained link runs the parent first: menuMessage).
  async function runReply(set, reply, auto = false, parent = null) {
    const message = parent ? menuMessage(parent.reply, reply, set.name) : reply.message || "";
    if (!message) return undefined; // SillyTavern runs nothing for an empty reply
    const [commands, lines] = replyLines(message);
    if (!auto && commands && lines.every((line) => isOwnCommand(line))) return runLines(lines);
    const typed = composer.text();
    const text = auto ? `${message} ` : clickText(set, { ...reply, message }, typed);
    if (!set.disableSend && !text.startsWith("/")) {
      nextTurnQuiet = reply.preventAutoExecute !== false;
      return send(text);
    }
    const body = { set: set.name, id: reply.id, input: auto ? "" : typed, auto, interactive: true };
    if (parent) body.parent = { set: parent.set.name, id: parent.reply.id };
    const start = () => api("POST", `${base}/quick-replies/click`, body);
    return scriptDone(() => runAsking(base, start), "", false);
  }

  // The replies flagged to run on their own: when the chat opens (executeOnChatChange), after
  // the user's message (executeOnUser) and after a reply (executeOnAi), one after another;
  // `scope`: only the sets bound there.
  async function runAutomatic(flag, scope = null) {
    for (const [set, reply] of quickReplies.automatic(flag, scope)) await runReply(set, reply, true);
  }

  // What runs as the screen opens, one after another: a question a script asked before the
  // page reloaded (asked again, the script goes on), then as SillyTavern: on the page's first
  // chat the global sets' executeOnStartup replies (its app start runs them before any chat
  // is loaded: only the global list is there), executeOnChatChange, and on a chat the page
  // has just made, executeOnNewChat.
  async function runOnOpen(fresh) {
    await resumeQuestions();
    if (firstStart()) await runAutomatic("executeOnStartup", "global");
    await runAutomatic("executeOnChatChange");
    if (fresh) await runAutomatic("executeOnNewChat");
  }

  async function resumeQuestions() {
    try {
      for (const outcome of await resumeAsking(base)) await scriptDone(async () => outcome, "", false);
    } catch (error) {
      fail(error, resumeQuestions);
    }
  }

  const quickReplies = createQuickReplies(base, (set, reply, parent) => runReply(set, reply, false, parent));
  const quickReplySets = createQuickReplyBindings(chat, base, () => loadQuickReplies());
  side.node.append(quickReplySets.node);
  async function loadQuickReplies() {
    try {
      quickReplySets.update((await quickReplies.load()).bindings);
    } catch (error) {
      fail(error, loadQuickReplies);
    }
  }
  await loadQuickReplies();

  // -- layout ------------------------------------------------------------------------------

  // the first message to go is sent with the revision it was shown at (see checked())
  const deleting = createDeleteMode(log.list, log.total, (from) => {
    const shown = log.list.querySelector(`.message[data-index="${from}"]`);
    const revision = shown ? shown.dataset.revision : "";
    const url = `${base}/messages/from/${from}`;
    return checked({ index: from }, () => api("DELETE", url, undefined, { ifMatch: revision }));
  });
  const tools = button(t("Chat tools"), () => side.node.classList.toggle("open"), { class: "tools-toggle" });
  const showTree = () => {
    side.node.classList.add("open");
    tree.open();
    tree.node.scrollIntoView({ block: "nearest" });
  };
  const treeButton = button(t("Chat tree"), showTree, { class: "tree-toggle" });
  const toolbar = h("div", { class: "chat-toolbar" }, tools, treeButton, deleting.start);
  // who the chat is with, before the toolbar on the same row: on a phone the side panel
  // (which names them on a desktop) is closed (style.css hides it on wider screens)
  const partner = group ? group.group.name : chat.character_name || chat.name;
  const who = h(
    "p",
    { class: "chat-who" },
    avatar(group ? "" : characterAvatar, partner),
    h("span", { class: "chat-who-name" }, partner),
  );
  view.append(
    h(
      "div",
      { class: "chat-screen" },
      side.node,
      h(
        "section",
        { class: "conversation", "aria-label": chat.name },
        h("div", { class: "chat-top" }, who, toolbar),
        log.node,
        alerts.node,
        group ? group.bar : null,
        deleting.bar,
        quickReplies.node,
        composer.node,
      ),
    ),
  );
  await (at === null ? log.showNewest() : log.showAt(at));
  if (chat.character_id) askCardScripts(chat.character_id, alerts, () => log.reload());
  runOnOpen(isNew(chat.id));
  const running = rememberedTurn(chat.id);
  if (running) follow(running.url, running.kind, true);
  composer.focus();
  return () => {
    if (stream) stream.close();
    if (group) group.close();
  };
}
