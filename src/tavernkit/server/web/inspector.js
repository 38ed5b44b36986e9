// The prompt inspector: the exact request the chat's next turn would send (a dry run on the
// server), block by block with its source and token count, the lorebook entries that fire
// and why, and the wire body.

import { api } from "./api.js";
import { reportError } from "./toast.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

const KINDS = ["normal", "swipe", "regenerate", "continue", "impersonate"];

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (part && part.text) || (part && part.type) || "").join("\n");
  }
  return JSON.stringify(content, null, 2);
}

// `params`: the hash's query; `persona` speaks as that persona (the chat screen's pick).
export async function showInspector(view, chatId, params = new URLSearchParams()) {
  const persona = params.get("persona") || "";
  const kind = h("select", { "aria-label": t("Turn kind") }, ...KINDS.map((k) => h("option", { value: k }, k)));
  const out = h("div", { class: "inspection" });

  async function load() {
    const data = await api(
      "GET",
      `/ui/chats/${encodeURIComponent(chatId)}/inspect?${new URLSearchParams({ kind: kind.value, ...(persona ? { persona } : {}) })}`,
    );
    const rows = data.blocks.map((block) =>
      h(
        "tr",
        { dataset: { source: block.source } },
        h("td", {}, block.identifier || ""),
        h("td", {}, block.source || ""),
        h("td", {}, block.role || ""),
        h("td", { class: "num" }, block.tokens ?? ""),
        h("td", {}, h("pre", {}, contentText(block.content))),
      ),
    );
    const lore = Object.entries(data.lorebook || {}).map(([key, entry]) =>
      h(
        "li",
        { dataset: { entry: key } },
        h("strong", {}, entry.comment || key),
        (entry.depth != null ? t(" ({world}, position {position}, depth {depth}): {why}", { world: entry.world, position: entry.position, depth: entry.depth, why: entry.why || "" }) : t(" ({world}, position {position}): {why}", { world: entry.world, position: entry.position, why: entry.why || "" })),
      ),
    );
    out.replaceChildren(
      h(
        "p",
        { class: "summary" },
        `${data.profile} · ${data.api} · ${data.source || ""} ${data.model || ""} · `,
        persona ? t("as {persona} · ", { persona }) : "",
        h("strong", {}, t("{total_tokens} tokens", { total_tokens: data.total_tokens })),
        t(" of {budget} budget", { budget: data.budget }),
      ),
      h(
        "table",
        { class: "blocks" },
        h("thead", {}, h("tr", {}, ...[t("Block"), t("Source"), t("Role"), t("Tokens"), t("Content")].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows),
      ),
      h("h2", {}, t("Lorebook entries that fire")),
      lore.length ? h("ul", { class: "lore" }, lore) : h("p", {}, t("None.")),
      h("details", {}, h("summary", {}, t("Request body")), h("pre", {}, JSON.stringify(data.request, null, 2))),
    );
  }

  kind.addEventListener("change", () => load().catch(reportError));
  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, t("Prompt inspector")),
      h("a", { href: `#/chat/${encodeURIComponent(chatId)}` }, t("Back to the chat")),
      kind,
    ),
    out,
  );
  await load();
}
