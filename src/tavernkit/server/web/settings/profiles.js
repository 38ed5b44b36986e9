// Connection profiles (Settings; the admin page shows the server's shared ones with the same
// component, `shared`). Keys are write-only: typed once, then shown only as their label and
// fingerprint (or $NAME for an environment key, env:NAME). A profile row tests the connection
// (one tiny request), makes the profile the active one, opens it in the form to edit (its
// fields, its keys only when new ones are typed, its response review) and its fallback
// chain, or deletes it with its keys.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

// A failed "Test", in words: what the task code means and what to change in the profile.
const TEST_HINTS = {
  auth_missing: () => t("The service refused the API key, or the profile has none: Edit the profile to set it."),
  network: () => t("The server could not be reached, or failed: check the profile's base URL, or try again later."),
  rate_limit: () => t("The key is rate limited or out of quota: wait, or add another key."),
  unsupported_api: () => t("The service does not serve this model: Edit the profile to pick another."),
};

const APIS = [
  ["chat", t("Chat completion")],
  ["text", t("Text completion")],
  ["kobold", "KoboldAI"],
  ["novel", "NovelAI"],
  ["local", t("Local")],
];
const TIMEOUTS = [
  ["connect", t("Connect timeout (s)")],
  ["first_byte", t("First byte timeout (s)")],
  ["idle", t("Idle timeout (s)")],
];

// A control under its visible label, named by that text alone.
function field(label, control, className = "field") {
  control.setAttribute("aria-label", label);
  return className.includes("check") ? h("label", { class: className }, control, label) : h("label", { class: className }, label, control);
}

function options(choices, current) {
  return choices.map(([value, text]) => h("option", { value, selected: value === (current ?? "") }, text));
}

function reviewLabel(review) {
  if (!review) return "";
  if (!review.enabled) return t("review off");
  if (!review.reviewer_profile) return t("review: inherited");
  return t("review: {reviewer}", { reviewer: review.reviewer_model ? `${review.reviewer_profile}:${review.reviewer_model}` : review.reviewer_profile });
}

// What a row says besides its columns: fallbacks, review, bound preset, timeouts.
function extras(profile) {
  const parts = [];
  if (profile.fallbacks && profile.fallbacks.length) {
    const chain = profile.fallbacks.join(" → ");
    parts.push(profile.randomize ? t("fallbacks: {chain} (randomized)", { chain }) : t("fallbacks: {chain}", { chain }));
  }
  const review = reviewLabel(profile.review);
  if (review) parts.push(review);
  if (profile.preset) parts.push(t("preset: {name}", { name: profile.preset }));
  const limits = profile.timeouts || {};
  const times = TIMEOUTS.filter(([key]) => limits[key] != null).map(([key]) => `${key.replace("_", " ")} ${limits[key]}s`);
  if (times.length) parts.push(t("timeouts: {list}", { list: times.join(", ") }));
  return parts.join(" · ");
}

// `shared`: the server's profiles (/shared/profiles: list, add, delete; no test, no
// selection, no edits).
export async function profilesSection({ shared = false } = {}) {
  const base = shared ? "/shared/profiles" : "/profiles";
  const title = shared ? t("Shared connection profiles") : t("Connection profiles");
  const alerts = createAlerts();
  const body = h("tbody");
  const active = h("p", { class: "muted" });
  const formSlot = h("div");
  const fallbackSlot = h("div");
  let profiles = [];
  let presets = [];

  // run an action; a refusal stays on screen (with Retry) until dismissed
  const attempt = async (action, retry = true) => {
    try {
      await action();
      return true;
    } catch (error) {
      alerts.show(errorText(error, { withField: true }), retry ? { retry: () => attempt(action) } : {});
      return false;
    }
  };

  const refresh = async () => {
    profiles = await api("GET", base);
    body.replaceChildren(...profiles.map(row));
    if (!shared) {
      const on = profiles.find((p) => p.active);
      active.replaceChildren(
        on ? t("Active: {name}. ", { name: on.name }) : t("No profile is active: turns use the embedded model. "),
        on ? button(t("Use the embedded model"), () => attempt(async () => {
          await api("PATCH", "/settings/selections", { profile: null });
          toast(t("Turns use the embedded model"), "info");
          await refresh();
        })) : "",
      );
    }
  };

  function row(profile) {
    const result = h("span", { class: "check", role: "status" });
    const name = encodeURIComponent(profile.name);
    const actions = [];
    if (!shared) {
      actions.push(
        button(
          t("Test"),
          async () => {
            result.textContent = t("testing…");
            try {
              const check = await api("POST", `/ui/profiles/${name}/test`);
              const failed = t("failed ({code}): {message}", { code: check.code, message: check.message });
              const hint = TEST_HINTS[check.code];
              result.textContent = check.ok ? t("OK: {text}", { text: check.text }) : hint ? `${failed}. ${hint()}` : failed;
            } catch (error) {
              result.textContent = "";
              alerts.show(errorText(error, { withField: true }));
            }
          },
          { "aria-label": t("Test {name}", { name: profile.name }) },
        ),
      );
      if (!profile.active) {
        actions.push(
          button(
            t("Make active"),
            () => attempt(async () => {
              await api("PATCH", "/settings/selections", { profile: profile.name });
              toast(t("Active profile: {name}", { name: profile.name }), "info");
              await refresh();
            }),
            { "aria-label": t("Make {name} active", { name: profile.name }) },
          ),
        );
      }
      actions.push(button(t("Edit"), () => showForm(profile), { "aria-label": t("Edit {name}", { name: profile.name }) }));
    }
    actions.push(
      button(
        t("Delete"),
        () => {
          if (!window.confirm(t("Delete the profile {name} and its keys?", { name: profile.name }))) return;
          attempt(async () => {
            await api("DELETE", `${base}/${name}`);
            await refresh();
            if (formSlot.dataset.editing === profile.name) showForm(null);
          }, false);
        },
        { "aria-label": t("Delete {name}", { name: profile.name }), class: "danger" },
      ),
    );
    return h(
      "tr",
      { dataset: { profile: profile.name } },
      h("td", { "data-label": t("Name") }, profile.name, profile.active ? t(" (active)") : ""),
      h("td", { "data-label": t("API") }, `${profile.api} · ${profile.source}`),
      h("td", { "data-label": t("Model") }, profile.model || ""),
      h("td", { "data-label": t("URL"), class: "url" }, profile.base_url || ""),
      h("td", { "data-label": t("Keys") }, profile.keys.join(", "), extras(profile) ? h("div", { class: "muted small" }, extras(profile)) : ""),
      h("td", {}, h("div", { class: "actions" }, ...actions, result)),
    );
  }

  // The form: a new profile (`editing` null) or the profile `editing`, its fields filled in.
  function showForm(editing) {
    formSlot.dataset.editing = editing ? editing.name : "";
    const limits = (editing && editing.timeouts) || {};
    const inputs = {
      name: h("input", { required: true, maxlength: 200, value: editing ? editing.name : "", readonly: Boolean(editing) }),
      api: h("select", {}, options(APIS, editing ? editing.api : "chat")),
      source: h("input", { value: editing ? editing.source : "openai" }),
      base_url: h("input", { placeholder: "https://…/v1", value: (editing && editing.base_url) || "" }),
      model: h("input", { value: (editing && editing.model) || "" }),
      key: h("input", { type: "password", autocomplete: "off" }),
      more: h("textarea", { rows: 2, autocomplete: "off", class: "secret" }),
    };
    const timeouts = TIMEOUTS.map(([key, label]) => {
      const input = h("input", { type: "number", min: "0", step: "any", value: limits[key] ?? "" });
      return { key, label, input };
    });
    const parts = [
      field(t("Profile name"), inputs.name),
      field(t("API"), inputs.api),
      field(t("Source"), inputs.source),
      field(t("Base URL"), inputs.base_url),
      field(t("Model"), inputs.model),
      field(t("API key"), inputs.key),
      field(t("Extra keys (one per line)"), inputs.more),
      ...timeouts.map(({ label, input }) => field(label, input)),
    ];
    let preset = null;
    let activate = null;
    let review = null;
    let reviewer = null;
    if (!shared) {
      preset = h("select", {}, options([["", t("None")], ...presets.map((n) => [n, n])], editing ? editing.preset : ""));
      parts.push(field(t("Own chat preset"), preset));
    }
    if (!shared && !editing) {
      activate = h("input", { type: "checkbox" });
      parts.push(field(t("Make it the active profile"), activate, "field check"));
    }
    if (editing) {
      const r = editing.review;
      const current = !r ? "" : !r.enabled ? "off" : r.reviewer_profile ? `pin:${r.reviewer_profile}` : "inherited";
      review = h(
        "select",
        {},
        options(
          [
            ["", t("None (a chat may turn it on)")],
            ["inherited", t("On: this profile's own model reviews")],
            ["off", t("Off (even where a chat turns it on)")],
            ...profiles.map((p) => [`pin:${p.name}`, t("On: {name} reviews", { name: p.name })]),
          ],
          current,
        ),
      );
      reviewer = h("input", { value: (r && r.reviewer_model) || "", placeholder: t("the reviewer's own") });
      parts.push(field(t("Response review"), review), field(t("Reviewer's model (optional)"), reviewer));
    }
    const note = editing
      ? t("Editing {name}: its keys ({count}) stay unless you type new ones, which replace them all.", { name: editing.name, count: editing.keys.length })
      : t("A key is write-only: after saving it is shown only as a label and fingerprint. env:NAME reads it from the server's environment.");
    const form = h(
      "form",
      { class: "profile-form", "aria-label": editing ? t("Edit profile {name}", { name: editing.name }) : t("New profile") },
      h("h3", {}, editing ? t("Edit {name}", { name: editing.name }) : t("New profile")),
      h("p", { class: "muted" }, note),
      h("div", { class: "fields" }, ...parts),
      h(
        "div",
        { class: "row" },
        h("button", { type: "submit", class: "primary" }, editing ? t("Save profile") : t("Add profile")),
        editing ? button(t("Cancel"), () => showForm(null)) : "",
      ),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const keys = [inputs.key.value, ...inputs.more.value.split("\n")].map((k) => k.trim()).filter(Boolean);
      const times = Object.fromEntries(timeouts.map(({ key, input }) => [key, input.value === "" ? null : Number(input.value)]));
      const fields = {
        api: inputs.api.value,
        source: inputs.source.value.trim() || "openai",
        base_url: inputs.base_url.value.trim() || null,
        model: inputs.model.value.trim() || null,
        timeouts: times,
      };
      if (preset) fields.preset = preset.value || null;
      const done = await attempt(async () => {
        if (editing) {
          if (keys.length) fields.keys = keys;
          const choice = review.value;
          fields.review = !choice
            ? null
            : choice === "off"
              ? { enabled: false }
              : choice === "inherited"
                ? { enabled: true }
                : { enabled: true, reviewer_profile: choice.slice(4), reviewer_model: reviewer.value.trim() || null };
          await api("PATCH", `/profiles/${encodeURIComponent(editing.name)}`, fields);
          toast(t("Profile saved"), "info");
        } else {
          await api("POST", base, { name: inputs.name.value.trim(), ...fields, keys, activate: activate ? activate.checked : false });
          toast(t("Profile added"), "info");
        }
      }, false);
      // a key never stays in the page once sent (nor after a refusal: it is typed again)
      inputs.key.value = inputs.more.value = "";
      if (!done) return;
      await refresh();
      showForm(null);
    });
    formSlot.replaceChildren(form);
    fallbackSlot.replaceChildren(editing ? fallbacksEditor(editing) : "");
    if (editing) inputs.source.focus();
  }

  // The fallback chain of `profile`: each change is saved at once (PUT .../fallbacks).
  function fallbacksEditor(profile) {
    const steps = (profile.fallbacks || []).map((label) => {
      const at = label.indexOf(":");
      return at < 0 ? { profile: label, model: null } : { profile: label.slice(0, at), model: label.slice(at + 1) };
    });
    const save = (entries, randomize) =>
      attempt(async () => {
        const updated = await api("PUT", `/profiles/${encodeURIComponent(profile.name)}/fallbacks`, { entries, randomize });
        await refresh();
        fallbackSlot.replaceChildren(fallbacksEditor(updated));
      }, false);
    const list = h(
      "ol",
      { class: "fallbacks" },
      steps.map((step, i) => {
        const label = step.model ? `${step.profile}:${step.model}` : step.profile;
        return h(
          "li",
          {},
          h("span", {}, `${i + 1}. ${label}`),
          button(t("Remove"), () => save(steps.filter((_, j) => j !== i), profile.randomize), { "aria-label": t("Remove fallback {label}", { label }) }),
        );
      }),
    );
    // another profile comes first: the profile itself only backs up with another model
    const others = [...profiles.filter((p) => p.name !== profile.name), ...profiles.filter((p) => p.name === profile.name)];
    const other = h("select", {}, options(others.map((p) => [p.name, p.name]), others.length ? others[0].name : ""));
    const model = h("input", { placeholder: t("its own") });
    const randomize = h("input", { type: "checkbox", checked: profile.randomize });
    randomize.addEventListener("change", () => save(steps, randomize.checked));
    return h(
      "fieldset",
      { class: "fallback-editor" },
      h("legend", {}, t("Fallbacks of {name}", { name: profile.name })),
      h("p", { class: "muted" }, t("Tried in order when this profile fails a turn. Saved at once.")),
      steps.length ? list : h("p", { class: "muted" }, t("No fallbacks.")),
      h(
        "div",
        { class: "fields" },
        field(t("Fallback profile"), other),
        field(t("Fallback's other model (optional)"), model),
      ),
      h(
        "div",
        { class: "row" },
        button(t("Add fallback"), () => save([...steps, { profile: other.value, model: model.value.trim() || null }], profile.randomize)),
        field(t("Randomize the lead each turn"), randomize, "field check"),
      ),
    );
  }

  if (!shared) presets = (await api("GET", "/presets/chat?limit=500")).items.map((p) => p.name);
  await refresh();
  showForm(null);
  return h(
    "section",
    { class: "card", "aria-label": title },
    h("h2", {}, title),
    shared ? h("p", { class: "muted" }, t("The server's own profiles: users never see their keys. The one the server's settings name (shared_profile) is the route a user's turn falls back to when their own keys fail.")) : active,
    alerts.node,
    h(
      "table",
      { class: "records" },
      h("thead", {}, h("tr", {}, [t("Name"), t("API"), t("Model"), t("URL"), t("Keys"), ""].map((t) => h("th", {}, t)))),
      body,
    ),
    formSlot,
    fallbackSlot,
  );
}
