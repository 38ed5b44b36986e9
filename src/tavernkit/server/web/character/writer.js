// The character editor's Writer box: the connection profile and preset this character's turns
// use instead of the chat's (its "writer"; in a group, each member its own). Stored in the
// card where SillyTavern-compatible cards keep extensions, data.extensions.tavernkit.writer
// = {profile, preset}, and saved with the card's Save. "Same as chat" leaves that part to the
// chat. A name no longer stored stays shown as "(not stored)": the character's turns are then
// refused by name (never sent to another model) until another choice is saved.

import { api } from "../api.js";
import { h } from "../dom.js";
import { t } from "../i18n.js";

const SAME = "";

function writerOf(card) {
  const ext = (card.data && card.data.extensions) || {};
  const ours = ext.tavernkit && typeof ext.tavernkit === "object" ? ext.tavernkit : {};
  const raw = ours.writer && typeof ours.writer === "object" ? ours.writer : {};
  const name = (v) => (typeof v === "string" && v.trim() ? v.trim() : null);
  return { profile: name(raw.profile), preset: name(raw.preset) };
}

// A select named by its visible label alone (a <select> inside a <label> would add its chosen
// option's text to its name).
function choice(label, groups, current) {
  const known = groups.some(([, names]) => names.includes(current));
  const select = h(
    "select",
    { "aria-label": label },
    h("option", { value: SAME }, t("Same as chat")),
    groups.flatMap(([title, names]) => {
      const items = names.map((n) => h("option", { value: n }, n));
      return title ? (items.length ? [h("optgroup", { label: title }, items)] : []) : items;
    }),
    current && !known ? h("option", { value: current }, t("{name} (not stored)", { name: current })) : null,
  );
  select.value = current || SAME;
  return { select, node: h("label", { class: "field" }, h("span", { class: "label" }, label), select) };
}

// `profiles`: the connection profiles' names; `chatPresets`, `textPresets`: the presets'.
export function createWriter(card, { profiles, chatPresets, textPresets }) {
  const start = writerOf(card);
  const profile = choice(t("Connection profile"), [[null, profiles]], start.profile);
  const preset = choice(
    t("Preset"),
    [
      [t("Chat completion"), chatPresets],
      [t("Text completion"), textPresets.filter((n) => !chatPresets.includes(n))],
    ],
    start.preset,
  );
  const node = h(
    "section",
    { class: "card writer-box", "aria-label": t("Writer") },
    h("h2", {}, t("Writer")),
    h("p", { class: "muted" }, t("The model this character writes with. Summaries and other side tasks use the utility model in Settings.")),
    profile.node,
    preset.node,
  );

  // `body` (a card as form.read gives it) with the writer chosen here; an unchanged choice
  // leaves the card's JSON exactly as it was read.
  function apply(body) {
    const wanted = { profile: profile.select.value || null, preset: preset.select.value || null };
    if (wanted.profile === start.profile && wanted.preset === start.preset) return body;
    const data = (body.data = body.data && typeof body.data === "object" ? body.data : {});
    const ext = (data.extensions = data.extensions && typeof data.extensions === "object" ? data.extensions : {});
    const ours = ext.tavernkit && typeof ext.tavernkit === "object" ? { ...ext.tavernkit } : {};
    if (wanted.profile || wanted.preset) ours.writer = wanted;
    else delete ours.writer;
    if (Object.keys(ours).length) ext.tavernkit = ours;
    else delete ext.tavernkit;
    return body;
  }

  // after a save: the stored writer is the new starting point
  function saved(newCard) {
    Object.assign(start, writerOf(newCard));
  }

  return { node, apply, saved, profile: profile.select, preset: preset.select };
}

// The Writer box for `card`, with the user's profiles and presets to choose from.
export async function loadWriter(card) {
  const [profiles, chat, text] = await Promise.all([
    api("GET", "/profiles"),
    api("GET", "/presets/chat?limit=500"),
    api("GET", "/presets/textgen?limit=500"),
  ]);
  return createWriter(card, {
    profiles: profiles.map((p) => p.name),
    chatPresets: chat.items.map((p) => p.name),
    textPresets: text.items.map((p) => p.name),
  });
}
