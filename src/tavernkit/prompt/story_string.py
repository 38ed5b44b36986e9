"""The story string: the Handlebars subset SillyTavern's context templates use.

SillyTavern compiles ``story_string`` with Handlebars (``noEscape``) and these helpers: ``trim``
returns the literal ``{{trim}}`` (the macro engine removes it later with its newlines), and any
mustache with no value (``helperMissing``) is handed to the macro engine as ``{{name}}``.
Supported: ``{{name}}`` and ``{{{name}}}``, ``{{#if x}}…{{else}}…{{/if}}``, ``{{#unless}}``,
comments ``{{! }}`` / ``{{!-- --}}``, whitespace control ``~`` and Handlebars' standalone-line
rule for block tags. ``#if`` uses Handlebars truthiness: ``""``, ``false``, ``None``, ``0`` and
empty lists are false; the strings ``"0"`` and ``"false"`` are true.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tavernkit.errors import FormatError

__all__ = ["StoryTemplate", "compile_story_string", "handlebars_truthy", "render_story_string"]

_TAG = re.compile(r"\{\{(~?)(\{?)(!--.*?--|!.*?|[^{}]*?)(\}?)(~?)\}\}", re.DOTALL)
_BLOCK_HELPERS = ("if", "unless")


def handlebars_truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and value == value
    if isinstance(value, str | list | tuple):
        return len(value) > 0
    return True


@dataclass(slots=True)
class _Text:
    text: str


@dataclass(slots=True)
class _Var:
    name: str
    raw: str


@dataclass(slots=True)
class _Block:
    helper: str
    arg: str
    body: list[Any] = field(default_factory=list)
    inverse: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class _Token:
    kind: str  # "text", "var", "open", "else", "close", "comment"
    value: str
    start: int
    end: int
    strip_left: bool = False
    strip_right: bool = False


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    for match in _TAG.finditer(source):
        if match.start() > pos:
            tokens.append(_Token("text", source[pos : match.start()], pos, match.start()))
        inner = match.group(3).strip()
        left, right = match.group(1) == "~", match.group(5) == "~"
        if inner.startswith("!"):
            kind, value = "comment", ""
        elif inner.startswith("#"):
            kind, value = "open", inner[1:].strip()
        elif inner.startswith("/"):
            kind, value = "close", inner[1:].strip()
        elif inner == "else" or inner.startswith("else "):
            kind, value = "else", inner[4:].strip()
        elif inner.startswith("^") and len(inner) == 1:
            kind, value = "else", ""
        else:
            kind, value = "var", inner
        tokens.append(_Token(kind, value, match.start(), match.end(), left, right))
        pos = match.end()
    if pos < len(source):
        tokens.append(_Token("text", source[pos:], pos, len(source)))
    _apply_whitespace_control(tokens)
    return tokens


def _apply_whitespace_control(tokens: list[_Token]) -> None:
    """``~`` strips the neighbouring text's whitespace; a block tag alone on its line loses the
    line's indentation and its line break (Handlebars' standalone rule)."""
    for i, tok in enumerate(tokens):
        if tok.kind == "text":
            continue
        prev = tokens[i - 1] if i > 0 and tokens[i - 1].kind == "text" else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1].kind == "text" else None
        if tok.strip_left and prev is not None:
            prev.value = prev.value.rstrip()
        if tok.strip_right and nxt is not None:
            nxt.value = nxt.value.lstrip()
        if tok.kind not in ("open", "close", "else", "comment"):
            continue
        if prev is None:
            before_ok = i == 0
        elif "\n" in prev.value:
            before_ok = re.search(r"\n[ \t]*$", prev.value) is not None
        else:
            before_ok = i == 1 and re.fullmatch(r"[ \t]*", prev.value) is not None
        if nxt is None:
            after_ok = i == len(tokens) - 1
        elif "\n" in nxt.value:
            after_ok = re.match(r"[ \t]*\r?\n", nxt.value) is not None
        else:
            after_ok = i == len(tokens) - 2 and re.fullmatch(r"[ \t]*", nxt.value) is not None
        if before_ok and after_ok:
            if prev is not None:
                prev.value = re.sub(r"[ \t]*$", "", prev.value)
            if nxt is not None:
                nxt.value = re.sub(r"^[ \t]*(\r?\n)?", "", nxt.value, count=1)


def _parse(tokens: list[_Token], source_name: str) -> list[Any]:
    root: list[Any] = []
    stack: list[tuple[_Block, list[Any]]] = []
    current = root
    for tok in tokens:
        if tok.kind == "text":
            if tok.value:
                current.append(_Text(tok.value))
        elif tok.kind == "comment":
            continue
        elif tok.kind == "var":
            name = tok.value
            current.append(_Var(name, name))
        elif tok.kind == "open":
            helper, _, arg = tok.value.partition(" ")
            block = _Block(helper, arg.strip())
            current.append(block)
            stack.append((block, current))
            current = block.body
        elif tok.kind == "else":
            if not stack:
                raise FormatError("{{else}} outside a block", field=source_name)
            block = stack[-1][0]
            current = block.inverse
        else:  # close
            if not stack or stack[-1][0].helper != tok.value:
                raise FormatError(f"unexpected {{{{/{tok.value}}}}}", field=source_name)
            _, current = stack.pop()
    if stack:
        raise FormatError(f"unclosed {{{{#{stack[-1][0].helper}}}}}", field=source_name)
    return root


@dataclass(frozen=True, slots=True)
class StoryTemplate:
    nodes: tuple[Any, ...]

    def render(
        self, params: Mapping[str, Any], helper_missing: Callable[[str], str] | None = None
    ) -> str:
        out: list[str] = []
        _render(list(self.nodes), params, helper_missing, out)
        return "".join(out)


def _lookup(params: Mapping[str, Any], name: str) -> Any:
    if name in ("this", "."):
        return params
    value: Any = params
    for part in name.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return None
    return value


def _render(
    nodes: list[Any],
    params: Mapping[str, Any],
    helper_missing: Callable[[str], str] | None,
    out: list[str],
) -> None:
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Var):
            if node.name == "trim":
                out.append("{{trim}}")
                continue
            value = _lookup(params, node.name) if " " not in node.name else None
            if value is None:
                if helper_missing is not None:
                    out.append(helper_missing("{{" + node.name.split(" ")[0] + "}}"))
                continue
            out.append(_stringify(value))
        else:
            truthy = handlebars_truthy(_lookup(params, node.arg))
            if node.helper == "unless":
                truthy = not truthy
            elif node.helper not in _BLOCK_HELPERS:
                truthy = False
            _render(node.body if truthy else node.inverse, params, helper_missing, out)


def _stringify(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return ",".join(_stringify(v) for v in value)
    return str(value)


@lru_cache(maxsize=256)
def compile_story_string(source: str) -> StoryTemplate:
    """Compile once per template text (templates change rarely; renders happen every turn)."""
    return StoryTemplate(tuple(_parse(_tokenize(source), "story_string")))


def render_story_string(
    source: str, params: Mapping[str, Any], helper_missing: Callable[[str], str] | None = None
) -> str:
    return compile_story_string(source).render(params, helper_missing)
