// A script's questions to the user (/input, /popup, /buttons, /echo awaitDismissal) as a
// modal <dialog>: focus stays in it, Escape closes it as SillyTavern's popup does (for
// /input, Cancel). `runAsking` drives a run that asks: it shows each question the server
// sends and posts the answer back until the script is done.

import { api } from "../api.js";
import { button, h } from "../dom.js";
import { t } from "../i18n.js";
import { render } from "../markdown.js";

let counter = 0;

// `start()` posts the script (or the click) with `interactive: true`; the result is the
// run's last step (the script's outcome).
export async function runAsking(base, start) {
  return answerRun(base, await start());
}

// The runs of this chat still waiting on a question a page that went away (a reload) showed:
// each is asked again and followed to its end; resolves with their outcomes.
export async function resumeAsking(base) {
  const { runs } = await api("GET", `${base}/script/runs`);
  const outcomes = [];
  for (const step of runs) outcomes.push(await answerRun(base, step));
  return outcomes;
}

// Ask each question of the run `step` belongs to until the script is done.
async function answerRun(base, step) {
  while (step && step.status === "asking") {
    const answer = await askUser(step.question);
    const url = `${base}/script/runs/${encodeURIComponent(step.run)}/answer`;
    step = await api("POST", url, { question: step.question.id, ...answer });
  }
  return step;
}

// Show `question`; resolves with the answer the server takes ({button, text, chosen}).
export function askUser(question) {
  return new Promise((resolve) => {
    counter += 1;
    const textId = `script-question-${counter}`;
    const text = h("div", { class: "question-text", id: textId }, render(question.text || ""));
    const labelled = question.text ? { "aria-labelledby": textId } : { "aria-label": t("Script question") };
    const classes = ["script-question", question.kind];
    if (question.large) classes.push("large");
    if (question.wide) classes.push("wide");
    const title = question.title ? h("h2", {}, question.title) : null;
    const dialog = h("dialog", { class: classes.join(" "), ...labelled }, title, text);
    let done = false;
    const finish = (answer) => {
      if (done) return;
      done = true;
      dialog.close();
      dialog.remove();
      resolve({ button: null, text: "", chosen: [], ...answer });
    };
    // Escape (and the browser closing the dialog) is a popup closed without a button
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish({ button: question.kind === "input" ? "cancel" : null });
    });
    dialog.addEventListener("keydown", (event) => trapTab(dialog, event));
    const { body, focus } = PARTS[question.kind](question, finish, textId);
    dialog.append(...body);
    document.body.append(dialog);
    dialog.showModal();
    focus.focus();
  });
}

// A modal <dialog> makes the page behind it inert, but Tab from its last control leaves for
// the browser's own UI: round it back to the first (and Shift+Tab from the first to the last).
function trapTab(dialog, event) {
  if (event.key !== "Tab") return;
  const items = [...dialog.querySelectorAll("button, textarea, input, a[href]")].filter((el) => !el.disabled);
  if (!items.length) return;
  const first = items[0];
  const last = items[items.length - 1];
  if (event.shiftKey && document.activeElement === first) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first.focus();
  }
}

const okLabel = (question) => question.ok_button || t("OK");

const PARTS = {
  input(question, finish, textId) {
    const box = h("textarea", { rows: String(question.rows || 4), "aria-labelledby": textId });
    box.value = question.default || "";
    const ok = () => finish({ button: "ok", text: box.value });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ok();
      }
    });
    const row = h("div", { class: "row" }, button(okLabel(question), ok), button(t("Cancel"), () => finish({ button: "cancel" })));
    queueMicrotask(() => box.select());
    return { body: [box, row], focus: box };
  },

  popup(question, finish) {
    const ok = button(okLabel(question), () => finish({ button: "ok" }));
    const row = h("div", { class: "row" }, ok);
    if (question.cancel_button) row.append(button(question.cancel_button, () => finish({ button: "cancel" })));
    return { body: [row], focus: ok };
  },

  buttons(question, finish) {
    const labels = question.labels || [];
    const list = h("div", { class: "choices" });
    const cancel = button(t("Cancel"), () => finish({ button: null }));
    if (!question.multiple) {
      labels.forEach((label, index) => list.append(button(label, () => finish({ button: "ok", chosen: [index] }))));
      return { body: [list, h("div", { class: "row" }, cancel)], focus: list.firstChild || cancel };
    }
    const picked = new Set();
    labels.forEach((label, index) => {
      const toggle = button(label, () => {
        if (picked.has(index)) picked.delete(index);
        else picked.add(index);
        toggle.setAttribute("aria-pressed", String(picked.has(index)));
      });
      toggle.setAttribute("aria-pressed", "false");
      list.append(toggle);
    });
    const ok = button(t("OK"), () => finish({ button: "ok", chosen: [...picked].sort((a, b) => a - b) }));
    return { body: [list, h("div", { class: "row" }, ok, cancel)], focus: list.firstChild || ok };
  },

  // /echo awaitDismissal: the toast the script waits on, dismissed here
  echo(question, finish) {
    const dismiss = button(t("Dismiss"), () => finish({ button: "ok" }));
    return { body: [h("div", { class: "row" }, dismiss)], focus: dismiss };
  },
};
