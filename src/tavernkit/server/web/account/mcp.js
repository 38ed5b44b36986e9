// Account > MCP servers: the caller's tool servers. Each is listed with where it runs and
// its credential (write-only: only its label and fingerprint come back); it is turned on or
// off whole, its tools listed (connecting to it) and switched one by one, or it is deleted
// with its stored token. A server that cannot be reached is an error that stays in view with
// Retry. New ones: an HTTP URL with a bearer token, or (admins, and the local mode) a stdio
// command run on the server's machine.

import { createAlerts } from "../alerts.js";
import { api } from "../api.js";
import { button, h } from "../dom.js";
import { errorText, toast } from "../toast.js";
import { t } from "../i18n.js";

const path = (name, rest = "") => `/mcp/servers/${encodeURIComponent(name)}${rest}`;

function field(label, control, className = "field") {
  control.setAttribute("aria-label", label);
  return className.includes("check") ? h("label", { class: className }, control, label) : h("label", { class: className }, label, control);
}

// `canStdio`: the caller may register a stdio server (an admin, or the local mode)
export async function mcpSection({ canStdio = false } = {}) {
  const alerts = createAlerts();
  const list = h("div", { class: "mcp-list" });
  const open = new Set(); // the servers whose tools are shown (shown again after a redraw)

  const refresh = async () => {
    const servers = await api("GET", "/mcp/servers");
    list.replaceChildren(...(servers.length ? servers.map(card) : [h("p", { class: "muted" }, t("No MCP servers."))]));
    await Promise.all(servers.filter((s) => open.has(s.name)).map((s) => showTools(s)));
  };

  const attempt = async (action) => {
    try {
      await action();
    } catch (error) {
      alerts.show(errorText(error, { withField: true }));
    }
  };

  function card(server) {
    const where = server.transport === "http" ? server.url : [server.command, ...server.args].join(" ");
    const tools = h("div", { class: "mcp-tools" });
    const node = h(
      "article",
      { class: "mcp-server", dataset: { server: server.name } },
      h(
        "div",
        { class: "mcp-head" },
        h("h3", {}, server.name),
        h("span", { class: server.enabled ? "badge on" : "badge" }, server.enabled ? t("on") : t("off")),
        h("span", { class: "muted" }, server.transport, server.purpose === "prose_linter" ? t(" · the review's prose linter ({linter_tool})", { linter_tool: server.linter_tool }) : ""),
      ),
      h("p", { class: "mcp-where" }, h("code", {}, where || "")),
      h("p", { class: "muted" }, t("Credential: {credential}", { credential: server.credential || t("none") }), server.env.length ? t(" · variables: {names}", { names: server.env.join(", ") }) : ""),
      h(
        "div",
        { class: "row" },
        button(
          server.enabled ? t("Turn off") : t("Turn on"),
          () => attempt(async () => {
            await api("PUT", path(server.name, "/enabled"), { enabled: !server.enabled });
            toast(server.enabled ? t("{name} is off", { name: server.name }) : t("{name} is on", { name: server.name }), "info");
            await refresh();
          }),
          { "aria-label": server.enabled ? t("Turn off {name}", { name: server.name }) : t("Turn on {name}", { name: server.name }) },
        ),
        button(t("Tools"), () => showTools(server), { "aria-label": t("Tools of {name}", { name: server.name }) }),
        button(
          t("Delete"),
          () => {
            if (!window.confirm(t("Delete the MCP server {name} and its stored token?", { name: server.name }))) return;
            attempt(async () => {
              await api("DELETE", path(server.name));
              open.delete(server.name);
              toast(t("{name} deleted", { name: server.name }), "info");
              await refresh();
            });
          },
          { "aria-label": t("Delete {name}", { name: server.name }), class: "danger" },
        ),
      ),
      tools,
    );
    return node;
  }

  // Connect and list the server's tools, each with its switch. A server that cannot be
  // reached is an alert in its card (with Retry) until dismissed or the retry works.
  async function showTools(server) {
    const box = list.querySelector(`[data-server="${CSS.escape(server.name)}"] .mcp-tools`);
    if (!box) return;
    open.add(server.name);
    if (!server.enabled) {
      box.replaceChildren(h("p", { class: "muted" }, t("Turn the server on to list its tools.")));
      return;
    }
    box.replaceChildren(h("p", { class: "muted", role: "status" }, t("Connecting…")));
    let offered;
    try {
      offered = await api("GET", path(server.name, "/tools"));
    } catch (error) {
      const failed = createAlerts();
      box.replaceChildren(failed.node);
      failed.show(t("Could not reach {name} to list its tools: {value}", { name: server.name, value: errorText(error, { withField: true }) }), {
        retry: () => showTools(server),
      });
      return;
    }
    const prefix = `${server.name}__`;
    const tools = [
      ...offered.map((t) => ({ name: t.name.startsWith(prefix) ? t.name.slice(prefix.length) : t.name, description: t.description, on: true })),
      ...server.disabled_tools.map((name) => ({ name, description: "", on: false })),
    ].sort((a, b) => a.name.localeCompare(b.name));
    if (!tools.length) {
      box.replaceChildren(h("p", { class: "muted" }, t("It offers no tools.")));
      return;
    }
    box.replaceChildren(
      h(
        "fieldset",
        { class: "tool-list" },
        h("legend", {}, t("Tools of {name} offered to chats", { name: server.name })),
        ...tools.map((tool) => {
          const check = h("input", { type: "checkbox", checked: tool.on });
          check.addEventListener("change", () =>
            attempt(async () => {
              try {
                await api("PUT", path(server.name, `/tools/${encodeURIComponent(tool.name)}/enabled`), { enabled: check.checked });
                toast(check.checked ? t("{name} offered", { name: tool.name }) : t("{name} not offered", { name: tool.name }), "info");
              } catch (error) {
                check.checked = !check.checked;
                throw error;
              }
            }),
          );
          return h(
            "div",
            { class: "tool" },
            h("label", { class: "field check" }, check, tool.name),
            tool.description ? h("span", { class: "muted small" }, tool.description) : "",
          );
        }),
      ),
    );
  }

  // the form for a new server
  const inputs = {
    name: h("input", { required: true, maxlength: 64, placeholder: t("e.g. search") }),
    transport: h("select", {}, h("option", { value: "http" }, t("HTTP (a URL)")), canStdio ? h("option", { value: "stdio" }, t("stdio (a command on the server's machine)")) : ""),
    url: h("input", { type: "url", placeholder: "https://…/mcp" }),
    token: h("input", { type: "password", autocomplete: "off" }),
    command: h("input", {}),
    args: h("textarea", { rows: 2 }),
    credential_env: h("input", { placeholder: t("e.g. API_TOKEN") }),
    purpose: h("select", {}, h("option", { value: "tools" }, t("Tools for chats")), h("option", { value: "prose_linter" }, t("The review's prose linter"))),
    linter_tool: h("input", {}),
    timeout: h("input", { type: "number", min: "1", max: "600", step: "any", value: "30" }),
  };
  const http = [field(t("URL"), inputs.url)];
  const stdio = [field(t("Command"), inputs.command), field(t("Arguments (one per line)"), inputs.args), field(t("Variable it is passed in"), inputs.credential_env)];
  const linter = field(t("Linter tool"), inputs.linter_tool);
  const sync = () => {
    const isStdio = inputs.transport.value === "stdio";
    for (const node of http) node.hidden = isStdio;
    for (const node of stdio) node.hidden = !isStdio;
    linter.hidden = inputs.purpose.value !== "prose_linter";
  };
  inputs.transport.addEventListener("change", sync);
  inputs.purpose.addEventListener("change", sync);
  const form = h(
    "form",
    { "aria-label": t("New MCP server") },
    h("h3", {}, t("Add an MCP server")),
    h(
      "div",
      { class: "fields" },
      field(t("Server name"), inputs.name),
      field(t("Transport"), inputs.transport),
      ...http,
      ...stdio,
      field(t("Token"), inputs.token),
      field(t("Use"), inputs.purpose),
      linter,
      field(t("Timeout (s)"), inputs.timeout),
    ),
    h("p", { class: "muted" }, t("The token is write-only: it is stored as one of your keys and shown only as its fingerprint.")),
    h("button", { type: "submit" }, t("Add server")),
  );
  sync();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const isStdio = inputs.transport.value === "stdio";
    const body = {
      name: inputs.name.value.trim(),
      transport: inputs.transport.value,
      purpose: inputs.purpose.value,
      timeout: Number(inputs.timeout.value) || 30,
    };
    if (isStdio) {
      body.command = inputs.command.value.trim();
      body.args = inputs.args.value.split("\n").map((a) => a.trim()).filter(Boolean);
      if (inputs.credential_env.value.trim()) body.credential_env = inputs.credential_env.value.trim();
    } else {
      body.url = inputs.url.value.trim();
    }
    if (inputs.token.value) body.token = inputs.token.value;
    if (body.purpose === "prose_linter") body.linter_tool = inputs.linter_tool.value.trim();
    try {
      const made = await api("POST", "/mcp/servers", body);
      inputs.token.value = ""; // never kept in the page once sent
      form.reset();
      sync();
      toast(t("MCP server {name} added", { name: made.name }), "info");
      await refresh();
      await showTools(made); // connect now: a server that cannot be reached says so
    } catch (error) {
      inputs.token.value = "";
      alerts.show(errorText(error, { withField: true }));
    }
  });

  await refresh();
  return h(
    "section",
    { class: "card", "aria-label": t("MCP servers") },
    h("h2", {}, t("MCP servers")),
    h("p", { class: "muted" }, t("Tool servers your chats may call (Model Context Protocol).")),
    alerts.node,
    list,
    form,
  );
}
