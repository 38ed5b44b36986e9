// What a server error says, in the UI's language. Every error answer carries a stable `code`
// and named `params` beside its English `message` (tavernkit/error_params.py): this table words
// each code from the catalogue with those parameters. It answers null for a code, a problem or
// a reason it does not know; the caller then shows the server's English text after the gist.

import { t } from "./i18n.js";

// The record kinds a "not found" or "name taken" names (the store's kinds and the routes' words).
const KINDS = {
  character: () => t("character"),
  chat: () => t("chat"),
  message: () => t("message"),
  lorebook: () => t("lorebook"),
  persona: () => t("persona"),
  group: () => t("group"),
  connection_profile: () => t("connection profile"),
  profile: () => t("connection profile"),
  chat_preset: () => t("chat-completion preset"),
  textgen_preset: () => t("text-completion preset"),
  preset: () => t("preset"),
  regex_script: () => t("regex script"),
  quick_reply_set: () => t("quick reply set"),
  branch: () => t("branch"),
  user: () => t("user"),
  token: () => t("API token"),
  api_key: () => t("API key"),
};

// The fields a user fills most often, by the last part of the answer's field path.
const FIELDS = {
  name: () => t("Name"),
  text: () => t("Message"),
  password: () => t("Password"),
  new_password: () => t("New password"),
  old_password: () => t("Current password"),
  profile: () => t("Connection profile"),
  persona: () => t("Persona"),
  model: () => t("Model"),
  description: () => t("Description"),
  max_tokens: () => t("Max response tokens"),
};

function fieldName(path) {
  const last = String(path || "").split(".").pop();
  const known = FIELDS[last];
  return known ? known() : t("“{field}”", { field: String(path || "").replace(/^body\./, "") });
}

function kindName(kind) {
  const known = KINDS[kind];
  return known ? known() : String(kind).replaceAll("_", " ");
}

function size(bytes) {
  const mib = bytes / (1024 * 1024);
  if (mib >= 1) return `${Number.isInteger(mib) ? mib : mib.toFixed(1)} MiB`;
  return `${Math.ceil(bytes / 1024)} KiB`;
}

// A request that did not pass validation: pydantic's error type, with its limits.
const PROBLEMS = {
  missing: (p) => t("{field} is required.", p),
  string_too_long: (p) => t("{field} can be at most {max_length} characters long.", p),
  string_too_short: (p) => t("{field} needs at least {min_length} characters.", p),
  too_long: (p) => t("{field} can hold at most {max_length} items.", p),
  too_short: (p) => t("{field} needs at least {min_length} items.", p),
  greater_than_equal: (p) => t("{field} must be at least {ge}.", p),
  greater_than: (p) => t("{field} must be more than {gt}.", p),
  less_than_equal: (p) => t("{field} must be at most {le}.", p),
  less_than: (p) => t("{field} must be less than {lt}.", p),
  int_parsing: (p) => t("{field} must be a whole number.", p),
  int_type: (p) => t("{field} must be a whole number.", p),
  int_from_float: (p) => t("{field} must be a whole number.", p),
  float_parsing: (p) => t("{field} must be a number.", p),
  float_type: (p) => t("{field} must be a number.", p),
  bool_parsing: (p) => t("{field} must be on or off.", p),
  bool_type: (p) => t("{field} must be on or off.", p),
  string_type: (p) => t("{field} must be text.", p),
  literal_error: (p) => t("{field} must be one of: {expected}.", p),
  enum: (p) => t("{field} must be one of: {expected}.", p),
  extra_forbidden: (p) => t("{field} is not something this accepts.", p),
  json_invalid: () => t("The request is not valid JSON."),
};

function invalid(p) {
  if (p.line != null) {
    return p.source
      ? t("{source} is not valid: line {line}, column {column}.", p)
      : t("Not valid: line {line}, column {column}.", p);
  }
  const problem = PROBLEMS[p.problem];
  return problem ? problem({ ...p, field: fieldName(p.field) }) : null;
}

// Why the server refused a caller (a login, a session, an admin's right).
const REFUSALS = {
  wrong_credentials: () => t("Wrong user name or password."),
  wrong_password: () => t("The current password is wrong; nothing was changed."),
  session_expired: () => t("Your session has ended; sign in again."),
  signed_out: () => t("Sign in first."),
  unknown_token: () => t("This API token is unknown or was revoked."),
  admin_only: () => t("Only an admin may do this."),
};

function refusal(p) {
  const known = REFUSALS[p.reason];
  return known ? known() : null;
}

function tooMany(p) {
  const values = { seconds: p.retry_after ?? 1 };
  return p.reason === "logins"
    ? t("Too many sign-in attempts; try again in {seconds} s.", values)
    : t("Too many model calls; try again in {seconds} s.", values);
}

// A task's or a turn's `invalid_input`: the names it was given that are not stored.
function invalidInput(p) {
  const field = String(p.field || "");
  if (field.startsWith("data.extensions.tavernkit.writer")) {
    return t("{character}'s writer names “{value}”, which cannot be used: choose another in the character's editor (Writer).", p);
  }
  if (field === "profile") return t("No connection profile named “{value}”.", p);
  if (field === "persona") return t("No persona named “{value}”.", p);
  return null;
}

function notFound(p) {
  if (p.name == null) return t("Not found.");
  if (!p.kind) return t("Nothing named “{name}” was found.", p);
  return t("No {kind} “{name}” was found.", { kind: kindName(p.kind), name: p.name });
}

const CODES = {
  invalid,
  not_found: notFound,
  name_taken: (p) => t("A {kind} named “{name}” exists already (and differs).", { kind: kindName(p.kind), name: p.name }),
  stale_revision: () => t("This was changed in another tab or device since you opened it; reload to see it as it is now."),
  chat_busy: () => t("The chat is still writing a reply: wait for it, or stop it first."),
  too_large: (p) => (p.limit_bytes ? t("This is larger than the limit of {size}.", { size: size(p.limit_bytes) }) : t("This is too large.")),
  quota: (p) => t("Your storage quota of {size} is used up: delete something first.", { size: size(p.limit_bytes || 0) }),
  too_many_attempts: tooMany,
  not_authenticated: (p) => refusal(p) || t("Sign in first."),
  permission_denied: refusal,
  egress_refused: () => t("This server may not connect to that address."),
  unavailable: () => t("The server cannot reach its database now; try again in a moment."),
  shutting_down: () => t("The server is restarting; try again in a moment."),
  internal: () => t("Something went wrong on the server; its log says what."),
  invalid_input: invalidInput,
  rate_limit: (p) =>
    p.quota
      ? t("The model's provider says this key's quota is used up: another key, or a later try, may work.")
      : t("The model's provider is busy; try again in a moment."),
  auth_missing: () => t("The model's provider refused the key, or this connection has no key."),
  network: () => t("The model's provider could not be reached."),
  no_response: () => t("The model's provider sent no answer."),
  unknown: (p) => (p.status ? t("The model's provider failed (HTTP {status}).", p) : t("The model's provider failed.")),
  context_budget: () => t("The prompt does not fit the model's context: shorten it or raise the context size."),
};

// `body`: an error answer's `error` object. The text in the UI's language, or null.
export function localizedError(body) {
  if (!body || typeof body.code !== "string") return null;
  const word = CODES[body.code];
  return word ? word(body.params || {}) : null;
}
