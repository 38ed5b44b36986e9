// One group (#/group/<id>, or #/group/new to make one): its name; its members (add from the
// stored characters, remove, reorder, mute); who replies (the reply strategy), whose card
// fields a reply's prompt carries (swap or join, with the join prefix and suffix), self
// responses and the auto-mode delay; delete it; start a chat and list its chats.

import { createAlerts } from "../alerts.js";
import { ApiError, api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, reportError, toast } from "../toast.js";
import { MODES, STRATEGIES, avatar, field, groupChats } from "./common.js";
import { t } from "../i18n.js";

const SEARCH_MS = 200;

function check(label, input) {
  return h("label", { class: "field check" }, input, label);
}

function select(options, value) {
  const node = h("select", {}, options.map(([v, text]) => h("option", { value: v }, text)));
  node.value = value ?? options[0][0];
  return node;
}

// `params`: `chat`, the chat the editor was opened from (a link back to it, saving first).
export async function showGroup(view, ref, params = new URLSearchParams()) {
  const isNew = ref === "new" || !ref;
  let group = isNew ? null : await api("GET", `/groups/${encodeURIComponent(ref)}`);
  const alerts = createAlerts();
  // the members as edited: {character_id, name, muted}, in reply order
  let members = group ? group.members.map((m) => ({ character_id: m.character_id, name: m.name, muted: m.muted, thumbnail_url: m.thumbnail_url })) : [];
  let dirty = false;

  const name = h("input", { value: group ? group.name : "", required: true, autocomplete: "off" });
  const strategy = select(STRATEGIES, group ? group.strategy : "natural");
  const mode = select(MODES, group ? group.mode : "swap");
  const prefix = h("textarea", { rows: 2 });
  const suffix = h("textarea", { rows: 2 });
  prefix.value = group ? group.join_prefix : "";
  suffix.value = group ? group.join_suffix : "";
  const selfResponses = h("input", { type: "checkbox", checked: Boolean(group && group.allow_self_responses) });
  const delay = h("input", { type: "number", min: 1, max: 999, step: 1, value: group ? group.auto_mode_delay : 5 });
  const joinFields = h(
    "div",
    { class: "fields join-fields" },
    field(t("Join prefix"), prefix),
    field(t("Join suffix"), suffix),
  );
  const syncJoin = () => {
    joinFields.hidden = mode.value === "swap";
  };
  mode.addEventListener("change", syncJoin);
  syncJoin();

  // -- members -----------------------------------------------------------------------------

  const memberList = h("ol", { class: "members", "aria-label": t("Members") });
  function paintMembers() {
    memberList.replaceChildren(
      ...members.map((m, i) => {
        const mute = h("input", { type: "checkbox", checked: m.muted });
        const up = t("Move {name} up", { name: m.name });
        const down = t("Move {name} down", { name: m.name });
        mute.addEventListener("change", () => {
          m.muted = mute.checked;
          changed();
        });
        return h(
          "li",
          { class: `member${m.muted ? " is-muted" : ""}`, dataset: { character: m.character_id } },
          avatar(m.thumbnail_url || "", m.name),
          h("span", { class: "name" }, m.name),
          h(
            "span",
            { class: "member-controls" },
            // every per-row control names its member in its visible text (a screen reader
            // hears "Remove Mira", not five "Remove"s); the arrows are icons, named by
            // aria-label (and a tooltip). The arrows come first: their width is the same in
            // every row, so on a phone every row's controls start alike
            button("↑", () => move(i, -1), { "aria-label": up, title: up, disabled: i === 0 }),
            button("↓", () => move(i, 1), { "aria-label": down, title: down, disabled: i === members.length - 1 }),
            button(t("Remove {name}", { name: m.name }), () => {
              members.splice(i, 1);
              changed();
            }),
            check(t("Mute {name}", { name: m.name }), mute),
          ),
        );
      }),
    );
    if (!members.length) memberList.append(h("li", { class: "muted" }, t("No members yet: add characters below.")));
    fillCandidates();
  }
  function move(i, by) {
    const [m] = members.splice(i, 1);
    members.splice(i + by, 0, m);
    changed();
  }
  function changed() {
    dirty = true;
    paintMembers();
  }

  // adding a member: the stored characters (searched by name) not in the group yet
  const find = h("input", { type: "search", placeholder: t("Search characters"), autocomplete: "off" });
  const candidates = h("select", {});
  let found = [];
  function fillCandidates() {
    const inGroup = new Set(members.map((m) => m.character_id));
    const free = found.filter((c) => !inGroup.has(c.id));
    candidates.replaceChildren(...free.map((c) => h("option", { value: c.id }, c.name)));
    if (!free.length) candidates.append(h("option", { value: "" }, t("No character to add")));
  }
  async function searchCharacters() {
    const query = new URLSearchParams({ limit: 200 });
    if (find.value.trim()) query.set("q", find.value.trim());
    found = (await api("GET", `/characters?${query}`)).items;
    fillCandidates();
  }
  let searchTimer;
  find.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => searchCharacters().catch(reportError), SEARCH_MS);
  });
  const add = button(t("Add"), () => {
    const picked = found.find((c) => c.id === candidates.value);
    if (!picked) return;
    members.push({ character_id: picked.id, name: picked.name, muted: false, thumbnail_url: picked.thumbnail_url });
    changed();
  });

  // -- saving ------------------------------------------------------------------------------

  function body() {
    return {
      name: name.value.trim(),
      members: members.map((m) => m.character_id),
      muted: members.filter((m) => m.muted).map((m) => m.character_id),
      strategy: strategy.value,
      mode: mode.value,
      allow_self_responses: selfResponses.checked,
      auto_mode_delay: Math.min(999, Math.max(1, Number(delay.value) || 5)),
      join_prefix: prefix.value,
      join_suffix: suffix.value,
    };
  }

  async function save() {
    if (!name.value.trim()) {
      alerts.show(t("A group needs a name."));
      name.focus();
      return false;
    }
    try {
      if (group) {
        group = await api("PATCH", `/groups/${encodeURIComponent(group.id)}`, body());
        toast(t("Group saved"), "info");
      } else {
        group = await api("POST", "/groups", body());
        toast(t("Group {name} made", { name: group.name }), "info");
        window.location.hash = `#/group/${encodeURIComponent(group.id)}`;
      }
      dirty = false;
      return true;
    } catch (error) {
      const taken = error instanceof ApiError && error.status === 409;
      alerts.show(taken ? t("{message}: pick another name.", { message: error.message }) : errorText(error), taken ? {} : { retry: save });
      return false;
    }
  }

  async function remove() {
    if (!window.confirm(t("Delete the group {name}? Its chats stay.", { name: group.name }))) return;
    try {
      await api("DELETE", `/groups/${encodeURIComponent(group.id)}`);
      toast(t("Group {name} deleted", { name: group.name }), "info");
      window.location.hash = "#/groups";
    } catch (error) {
      alerts.show(errorText(error), { retry: remove });
    }
  }

  // A new chat of the group (the edits saved first, so the chat opens with them).
  async function startChat() {
    if (dirty && !(await save())) return;
    try {
      const chat = await api("POST", `/groups/${encodeURIComponent(group.id)}/chats`, {});
      window.location.hash = `#/chat/${encodeURIComponent(chat.id)}`;
    } catch (error) {
      alerts.show(errorText(error), { retry: startChat });
    }
  }

  // Opened from a chat (its "Edit group"): the way back to it, with the edits saved first
  // (members added or muted mid-chat take part in its next turn).
  function backToChat() {
    const chatId = params.get("chat");
    if (!group || !chatId) return null;
    const href = `#/chat/${encodeURIComponent(chatId)}`;
    const back = h("a", { href, class: "back-to-chat" }, t("Back to the chat"));
    back.addEventListener("click", async (event) => {
      if (!dirty) return;
      event.preventDefault();
      if (await save()) window.location.hash = href;
    });
    return back;
  }

  for (const input of [name, strategy, mode, prefix, suffix, selfResponses, delay]) {
    input.addEventListener("change", () => {
      dirty = true;
    });
  }

  // -- layout ------------------------------------------------------------------------------

  const missing = group && group.missing.length
    ? h("p", { class: "notice", role: "note" }, t("Not found among your characters (left out when saved): {names}", { names: group.missing.join(", ") }))
    : null;
  const chats = group
    ? h(
        "section",
        { class: "card group-chats", "aria-label": t("Chats") },
        h("h2", {}, t("Chats")),
        button(t("Start new chat"), startChat, { class: "primary" }),
        h("ul", { class: "chat-list", "aria-label": t("Group chats") }, await groupChats(group)),
      )
    : null;
  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("a", { href: "#/groups" }, t("‹ Groups")),
      h("h1", {}, group ? group.name : t("New group")),
      backToChat(),
    ),
    alerts.node,
    h(
      "section",
      { class: "card group-editor", "aria-label": t("Group") },
      field(t("Group name"), name),
      h(
        "fieldset",
        {},
        h("legend", {}, t("Members")),
        missing,
        memberList,
        h("div", { class: "row add-member" }, field(t("Find character"), find), field(t("Add member"), candidates), add),
      ),
      h(
        "div",
        { class: "fields" },
        field(t("Reply strategy"), strategy),
        field(t("Generation mode"), mode),
        field(t("Auto mode delay (seconds)"), delay),
        check(t("Allow self responses"), selfResponses),
      ),
      joinFields,
      h(
        "div",
        { class: "row" },
        button(group ? t("Save") : t("Create group"), save, { class: "primary" }),
        group ? button(t("Delete group"), remove, { class: "danger" }) : null,
      ),
    ),
  );
  if (chats) view.append(chats);
  paintMembers();
  await searchCharacters();
  if (isNew) name.focus();
  return () => clearTimeout(searchTimer);
}
