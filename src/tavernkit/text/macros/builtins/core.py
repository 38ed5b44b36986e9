"""Utility, control-flow and random macros (SillyTavern's ``core-macros.js`` family)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from tavernkit.jscompat import is_false_boolean, js_trim
from tavernkit.text.macros.dice import DiceError, roll_dice
from tavernkit.text.macros.lexer import scan_document
from tavernkit.text.macros.output import ELSE_MARKER, trim_scoped
from tavernkit.text.macros.parser import Template
from tavernkit.text.macros.registry import ArgSpec, MacroCall, MacroRegistry, MacroRuntimeError
from tavernkit.text.macros.seeding import seeded_random, string_hash

__all__ = ["register", "split_list"]

_VAR_CONDITION = re.compile(r"([.$])([a-zA-Z](?:[\w-]*\w)?)", re.ASCII)
_LEADING_BANG = re.compile(r"^[\t\n\v\f\r \u00a0\u2028\u2029\ufeff]*!")
_STRIP_BANG = re.compile(r"^\s*!\s*")
_QUOTES = re.compile(r'^"|"$')
_COMMA_TOKEN = "\x00COMMA\x00"


def _count(call: MacroCall, unit: str) -> str:
    count = int(js_trim(call.arg(0, "1")) or "1")
    limit = call.evaluation.max_output
    if count > limit:
        raise MacroRuntimeError(f"count {count} exceeds the output limit {limit}")
    return unit * max(count, 0)


def split_list(items: list[str]) -> list[str]:
    """One argument is split on ``::`` if present, else on commas (``\\,`` escapes a comma)."""
    if len(items) != 1:
        return items
    text = items[0]
    if "::" in text:
        return [js_trim(item) for item in text.split("::")]
    text = text.replace("\\,", _COMMA_TOKEN)
    return [js_trim(item).replace(_COMMA_TOKEN, ",") for item in text.split(",")]


def _split_else(call: MacroCall, content: str) -> tuple[str, str | None]:
    """Split block content on its first ``{{else}}`` outside nested ``{{if}}`` blocks."""
    registry = call.evaluation.registry
    key = (content, "\x00else")
    found: tuple[str, str | None] | None = registry.cached(key)
    if found is None:
        found = _find_else(content)
        registry.store(key, found)
    return found


def _find_else(content: str) -> tuple[str, str | None]:
    depth = 0
    for raw in scan_document(content, 0, len(content)):
        if raw.is_var:
            continue
        closing = "/" in raw.flags
        if raw.name == "if" and not closing and len(raw.args) == 1:
            depth += 1
        elif raw.name == "if" and closing:
            depth -= 1
        elif raw.name == "else" and depth == 0:
            return content[: raw.start], content[raw.end :]
    return content, None


@dataclass(slots=True)
class _IfPlan:
    """What an ``{{if}}`` node needs on every evaluation, prepared once per node."""

    inverted: bool
    condition: Template | None
    then_branch: Template | None
    else_branch: Template | None


def _if_plan(call: MacroCall) -> _IfPlan:
    """Split the raw arguments into a condition and branches (a pure function of the node's
    text: the arguments of ``{{if}}`` arrive unevaluated)."""
    evaluation = call.evaluation
    args = call.args
    else_inline: str | None = None
    if len(args) == 1:
        # tavernkit addition (compat "default" only): {{if cond::then::else}} in one argument.
        pieces = args[0].split("::")
        if len(pieces) < 2 or call.is_scoped:
            raise MacroRuntimeError("needs a condition and content")
        args = pieces[:2]
        else_inline = "::".join(pieces[2:]) if len(pieces) > 2 else None
    elif len(args) == 3:
        else_inline = args[2]
    raw_condition, raw_content = args[0], args[1]
    inverted = bool(_LEADING_BANG.match(raw_condition))
    condition = _STRIP_BANG.sub("", raw_condition, count=1) if inverted else raw_condition
    then_branch: str | None
    else_branch: str | None
    if else_inline is not None:
        then_branch, else_branch = raw_content, else_inline
    else:
        then_branch, else_branch = _split_else(call, raw_content)

    def template(text: str | None) -> Template | None:
        return evaluation.template_of(text) if text else None

    return _IfPlan(inverted, template(condition), template(then_branch), template(else_branch))


def _if(call: MacroCall) -> str:
    evaluation = call.evaluation
    node = call._node
    plan: _IfPlan | None = node.plan if node is not None else None
    if plan is None:
        plan = _if_plan(call)
        if node is not None:
            node.plan = plan
    offset = call.global_offset
    condition = (
        evaluation.resolve_template(plan.condition, offset) if plan.condition is not None else ""
    )
    var = _VAR_CONDITION.fullmatch(condition)
    if var is not None:
        getter = "getvar" if var.group(1) == "." else "getglobalvar"
        condition = call.resolve("{{" + getter + "::" + var.group(2) + "}}")
    elif condition.strip():
        definition = evaluation.registry.get_primary(condition, evaluation.compat)
        overlay = evaluation.overlay
        if (definition is not None and definition.min_args == 0) or (
            overlay is not None and overlay.function(condition.strip().lower(), 0)
        ):
            condition = call.resolve("{{" + condition + "}}")
    falsy = condition == "" or is_false_boolean(condition)
    if plan.inverted:
        falsy = not falsy
    chosen = plan.else_branch if falsy else plan.then_branch
    if chosen is None:
        return ""
    result = evaluation.resolve_template(chosen, offset)
    return result if call.preserve_whitespace else trim_scoped(result)


def _trim(call: MacroCall) -> str:
    if call.is_scoped:
        return call.arg(0)
    return "{{trim}}"


def _reverse(call: MacroCall) -> str:
    return call.args[0][::-1]


def _roll(call: MacroCall) -> str:
    try:
        return str(roll_dice(call.args[0], call.env.random_source()))
    except DiceError as exc:
        call.warn(str(exc))
        return ""


def _random(call: MacroCall) -> str:
    # empty items are never picked ({{random::one,}} is always "one", recorded in the
    # STscript goldens)
    items = [item for item in split_list(call.list or []) if item]
    if not items:
        return ""
    source = call.env.random_macro_rng or call.env.random_source()
    return items[math.floor(source.random() * len(items))]


def chat_id_hash(call: MacroCall) -> int:
    env = call.env
    if not isinstance(env.chat_id_hash, int) or isinstance(env.chat_id_hash, bool):
        env.chat_id_hash = string_hash(env.chat_id)
    return env.chat_id_hash


def _pick(call: MacroCall) -> str:
    items = split_list(call.list or [])
    if not items:
        return ""
    env = call.env
    parts = [str(chat_id_hash(call)), str(call.evaluation.content_hash()), str(call.global_offset)]
    if env.pick_reroll_seed:
        parts.append(str(env.pick_reroll_seed))
    return items[math.floor(_seed_draw("-".join(parts)) * len(items))]


@lru_cache(maxsize=4096)
def _seed_draw(seed_text: str) -> float:
    """The draw for a pick seed (pure: the same chat, template and position give the same)."""
    return seeded_random(str(string_hash(seed_text)))


def _banned(call: MacroCall) -> str:
    word = _QUOTES.sub("", call.args[0])
    env = call.env
    if not call.evaluation.skip_side_effects:
        if env.banned_words is None:
            env.banned_words = []
        env.banned_words.append(word)
    return ""


def _outlet(call: MacroCall) -> str:
    key = call.args[0]
    outlets = call.env.outlets
    return outlets.get(key, "") if key and outlets else ""


def register(registry: MacroRegistry) -> None:
    count = ArgSpec("count", optional=True, type="integer", default="1")
    registry.register(
        "space",
        lambda c: _count(c, " "),
        args=[count],
        category="utility",
        description="One space, or count spaces.",
    )
    registry.register(
        "newline",
        lambda c: _count(c, "\n"),
        args=[count],
        category="utility",
        description="One newline, or count newlines.",
    )
    registry.register(
        "noop", lambda c: "", category="utility", description="Nothing.", pure=lambda env: ""
    )
    registry.register(
        "trim",
        _trim,
        args=[ArgSpec("content", optional=True)],
        category="utility",
        description="Scoped: the trimmed content. Bare: removes itself and the newlines around.",
    )
    if_help = "Conditional: {{if cond}}then{{else}}other{{/if}}; ! inverts."
    registry.register(
        "if",
        _if,
        args=["condition", "content"],
        delay_arg_resolution=True,
        category="utility",
        description=if_help,
        block_arg_counts=(1,),
        availability="st-1.18",
    )
    register_default_if(registry)
    registry.register(
        "else",
        lambda c: ELSE_MARKER,
        category="utility",
        description="Separates the branches of an {{if}} block.",
    )
    registry.register(
        "input",
        lambda c: c.env.input,
        category="utility",
        pure=lambda env: env.input,
        description="The text of the user's input box.",
    )
    registry.register(
        "maxPrompt",
        lambda c: str(c.env.max_prompt),
        aliases=["maxPromptTokens"],
        category="state",
        description="Maximum prompt size in tokens.",
    )
    registry.register(
        "maxContext",
        lambda c: str(c.env.max_context),
        aliases=["maxContextTokens"],
        category="state",
        description="Maximum context size in tokens.",
    )
    registry.register(
        "maxResponse",
        lambda c: str(c.env.max_response),
        aliases=["maxResponseTokens"],
        category="state",
        description="Maximum response size in tokens.",
    )
    registry.register(
        "reverse",
        _reverse,
        args=["value"],
        category="utility",
        description="The argument reversed.",
    )
    registry.register(
        "//",
        lambda c: "",
        aliases=["comment"],
        list=True,
        strict_args=False,
        category="utility",
        description="A comment: produces nothing.",
    )
    registry.register(
        "roll",
        _roll,
        args=["formula"],
        category="random",
        description="Rolls dice: {{roll::2d6+1}}; a bare number N means 1dN.",
    )
    registry.register(
        "random",
        _random,
        list=True,
        category="random",
        description="A random item of the list (new on every render).",
    )
    registry.register(
        "pick",
        _pick,
        list=True,
        category="random",
        description="An item of the list, stable for this chat and position.",
    )
    registry.register(
        "banned",
        _banned,
        args=["word"],
        category="utility",
        description="Adds a word to the text-completion ban list.",
    )
    registry.register(
        "outlet",
        _outlet,
        args=["key"],
        category="utility",
        description="The world-info outlet text for key.",
    )


def register_default_if(registry: MacroRegistry) -> None:
    """The ``{{if}}`` of compat "default": also ``{{if::cond::then::else}}`` and ``{{if c::t}}``."""
    registry.register(
        "if",
        _if,
        args=["condition", ArgSpec("content", optional=True), ArgSpec("else", optional=True)],
        delay_arg_resolution=True,
        category="utility",
        block_arg_counts=(1,),
        description="Conditional; inline forms {{if::cond::then::else}} are tavernkit additions.",
    )
