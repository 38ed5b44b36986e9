// Settings > Backups: one line saying when the last verified backup of the server's data was
// made (GET /backups/latest: the server's schedule, or the newest backup in the home's
// backups/ folder), when the next one is due, and how to turn scheduled backups on.

import { api } from "../api.js";
import { h } from "../dom.js";
import { errorText } from "../toast.js";
import { t } from "../i18n.js";

function when(iso) {
  const date = new Date(iso);
  const minutes = Math.round((Date.now() - date.getTime()) / 60000);
  const ago = minutes < 1 ? t("just now")
    : minutes < 90 ? t("{minutes} min ago", { minutes })
    : minutes < 48 * 60 ? t("{value} h ago", { value: Math.round(minutes / 60) })
    : t("{value} days ago", { value: Math.round(minutes / 1440) });
  return `${date.toLocaleString()} (${ago})`;
}

function statusLines(status) {
  const lines = [];
  if (status.last && status.last.verified) {
    lines.push(h("p", { class: "backup-last" }, t("Last verified backup: {value}", { value: when(status.last.created) })));
  } else {
    lines.push(h("p", { class: "backup-last backup-none" }, t("No verified backup yet.")));
  }
  if (status.scheduled) {
    const hours = status.every_s / 3600;
    const every = hours >= 1 ? `${+hours.toFixed(1)} h` : t("{value} min", { value: Math.round(status.every_s / 60) });
    const next = status.next_at ? t("; the next one {value}", { value: new Date(status.next_at).toLocaleString() }) : "";
    lines.push(h("p", { class: "muted" }, t("The server backs up every {every}{next}.", { every, next })));
  } else {
    lines.push(h("p", { class: "muted" }, t("Scheduled backups are off: start the server with tavernkit serve --backup-every 6h, or run tavernkit backup.")));
  }
  if (status.last_error) {
    lines.push(h("p", { role: "alert" }, t("The last scheduled backup failed: {last_error}", { last_error: status.last_error })));
  }
  return lines;
}

export async function backupsSection() {
  const body = h("div", {});
  const section = h("section", { class: "card", "aria-label": t("Backups") }, h("h2", {}, t("Backups")), body);
  try {
    body.append(...statusLines(await api("GET", "/backups/latest")));
  } catch (error) {
    body.append(h("p", { role: "alert" }, t("Cannot read the backup status: {value}", { value: errorText(error) })));
  }
  return section;
}
