"""The parser: lexed macros → documents of text and macro nodes, with blocks paired.

A document is the evaluation unit SillyTavern uses: the top-level text, each argument, each
block's content and each ``{{if}}`` branch is parsed on its own (SillyTavern re-parses them
the same way), lazily, and the result is kept on the node so a cached template is parsed once.

Block pairing follows SillyTavern: at each level only the outermost ``{{name}}…{{/name}}``
pair is formed (closing tags match case-insensitively); a pair forms only if the macro can take
one more argument, otherwise both tags stay as written; an unmatched closing tag stays as
written; the content between is parsed again as its own document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tavernkit.text.macros.lexer import RawMacro, scan_document, simple_document
from tavernkit.text.macros.registry import MacroRegistry

__all__ = ["Document", "MacroNode", "Template", "VarNode", "parse_range", "parse_template"]

_LEGACY_TIME = re.compile(r"\{\{time_(UTC[+-]\d+)\}\}", re.IGNORECASE)
_LEGACY_MARKERS = re.compile(r"<(USER|BOT|CHAR|GROUP|CHARIFNOTGROUP)>", re.IGNORECASE)
_MARKER_MACRO = {
    "user": "{{user}}",
    "bot": "{{char}}",
    "char": "{{char}}",
    "group": "{{group}}",
    "charifnotgroup": "{{charIfNotGroup}}",
}


def preprocess(text: str) -> str:
    """SillyTavern's pre-processors: ``{{time_UTC±N}}`` and the ``<USER>``-style markers."""
    if "{{" in text and "_" in text:
        text = _LEGACY_TIME.sub(lambda m: "{{time::" + m.group(1) + "}}", text)
    if "<" in text:
        text = _LEGACY_MARKERS.sub(lambda m: _MARKER_MACRO[m.group(1).lower()], text)
    return text


@dataclass(slots=True, eq=False)
class Document:
    """``text[start:end]`` as plain strings and nodes, in order (``parts``)."""

    text: str
    start: int
    end: int
    parts: list[str | MacroNode | VarNode]
    has_macros: bool


@dataclass(slots=True, eq=False)
class ArgSpan:
    start: int
    end: int
    doc: Document | None = None


@dataclass(slots=True, eq=False)
class MacroNode:
    name: str
    key: str
    flags: str
    start: int
    end: int
    inner_start: int
    inner_end: int
    args: list[ArgSpan]
    scoped: ArgSpan | None = None
    closing_end: int = 0
    keep_raw: bool = False
    lexer_errors: int = 0
    #: The argument values when every argument is plain text (no macro inside): computed on
    #: first evaluation, then reused (a cached template is evaluated every turn).
    literal_args: tuple[str, ...] | None = None
    #: Scratch space for a handler's per-node preparation (``{{if}}`` keeps its split here).
    plan: Any = None
    #: The definition whose argument count this node was found to satisfy (checked once).
    ready: Any = None


@dataclass(slots=True, eq=False)
class VarNode:
    scope: str  # "local" | "global"
    name: str
    op: str
    start: int
    end: int
    value_span: tuple[int, int] | None
    value_parts: list[str | MacroNode | VarNode] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Template:
    """A parsed top-level text: the raw source, the pre-processed text and its document."""

    source: str
    text: str
    doc: Document
    content_hash: int | None = None
    #: For a template made only of plain environment values ({{user}}, {{char}}, ...): the
    #: distinct macro keys (empty tuple: not such a template; None: not yet examined).
    pure_keys: tuple[str, ...] | None = None
    #: The last (values, output) of a pure template: same values, same text.
    last: tuple[tuple[str, ...], str] | None = None
    #: Whether the text has characters outside the BMP (None: not yet examined).
    astral: bool | None = None


def _to_node(raw: RawMacro, text: str) -> MacroNode | VarNode:
    if raw.is_var:
        node = VarNode(
            scope="local" if raw.var_scope == "." else "global",
            name=raw.name,
            op=raw.var_op,
            start=raw.start,
            end=raw.end,
            value_span=raw.value_span,
        )
        if raw.value_span is not None:
            vs, ve = raw.value_span
            inner = [n for n in raw.nested if n.start >= vs and n.end <= ve]
            node.value_parts = _interleave(text, vs, ve, [_to_node(n, text) for n in inner])
        return node
    return MacroNode(
        name=raw.name,
        key=raw.name.lower(),
        flags=raw.flags,
        start=raw.start,
        end=raw.end,
        inner_start=raw.inner_start,
        inner_end=raw.inner_end,
        args=[ArgSpan(s, e) for s, e in raw.args],
        lexer_errors=raw.lexer_errors,
    )


def _interleave(
    text: str, start: int, end: int, nodes: list[MacroNode | VarNode]
) -> list[str | MacroNode | VarNode]:
    parts: list[str | MacroNode | VarNode] = []
    cursor = start
    for node in nodes:
        if node.start > cursor:
            parts.append(text[cursor : node.start])
        parts.append(node)
        cursor = node.closing_end if isinstance(node, MacroNode) and node.scoped else node.end
    if cursor < end:
        parts.append(text[cursor:end])
    return parts


def parse_range(text: str, start: int, end: int, registry: MacroRegistry, compat: str) -> Document:
    """Parse ``text[start:end]`` as a standalone document."""
    if text.find("{{", start, end) < 0:
        return Document(text, start, end, [text[start:end]] if end > start else [], False)
    simple = simple_document(text, start, end)
    nodes: list[MacroNode | VarNode]
    if simple is not None:
        # the common template: plain macros only, built straight from the regex's matches
        nodes = [
            MacroNode(
                name, name.lower(), flags, s, e, s + 2, e - 2, [ArgSpan(a, b) for a, b in args]
            )
            for s, e, flags, name, args in simple
        ]
    else:
        nodes = [_to_node(raw, text) for raw in scan_document(text, start, end)]
    nodes = _pair_blocks(nodes, text, registry, compat)
    parts = _interleave(text, start, end, nodes)
    return Document(text, start, end, parts, bool(nodes))


def _pair_blocks(
    nodes: list[MacroNode | VarNode], text: str, registry: MacroRegistry, compat: str
) -> list[MacroNode | VarNode]:
    macros = [n for n in nodes if isinstance(n, MacroNode)]
    closing_keys = {m.key for m in macros if "/" in m.flags}
    if not closing_keys:
        return nodes
    # Only tags whose name has a closing tag somewhere can pair; index them by name.
    by_key: dict[str, list[MacroNode]] = {}
    for m in macros:
        if m.key in closing_keys:
            by_key.setdefault(m.key, []).append(m)
    matched: set[int] = set()
    scopes: list[tuple[int, int]] = []  # (start, end) of the blocks formed so far

    def can_accept(m: MacroNode) -> bool:
        definition = registry.get_primary(m.name, compat)
        return definition is None or definition.accepts_scoped(len(m.args))

    def inside(m: MacroNode) -> bool:
        # Openers are visited in order and tags inside a block never open one, so the blocks
        # are disjoint and in order: only the last one can hold a later tag.
        return bool(scopes) and scopes[-1][0] <= m.start and m.end <= scopes[-1][1]

    for opener in macros:
        if opener.key not in closing_keys or "/" in opener.flags or id(opener) in matched:
            continue
        if inside(opener):
            continue
        same = by_key[opener.key]
        depth = 1
        closer: MacroNode | None = None
        for other in same[same.index(opener) + 1 :]:
            if id(other) in matched:
                continue
            if "/" in other.flags:
                depth -= 1
                if depth == 0:
                    closer = other
                    break
            elif can_accept(other):
                depth += 1
        if closer is None:
            continue
        matched.add(id(opener))
        matched.add(id(closer))
        if not can_accept(opener):
            opener.keep_raw = closer.keep_raw = True
            continue
        opener.scoped = ArgSpan(opener.end, closer.start)
        opener.closing_end = closer.end
        scopes.append((opener.end, closer.start))
    for m in macros:
        if "/" in m.flags and id(m) not in matched:
            m.keep_raw = True
    if not scopes:
        return nodes
    kept: list[MacroNode | VarNode] = []
    index = 0
    for n in nodes:
        if isinstance(n, MacroNode) and n.scoped is None and "/" in n.flags and not n.keep_raw:
            continue  # a closing tag folded into its block
        while index < len(scopes) and scopes[index][1] < n.end:
            index += 1
        if index < len(scopes) and scopes[index][0] <= n.start:
            continue  # inside a block: its content is parsed on its own
        kept.append(n)
    return kept


def parse_template(source: str, registry: MacroRegistry, compat: str) -> Template:
    key = (source, compat)
    cached: Template | None = registry.cached(key)
    if cached is not None:
        return cached
    text = preprocess(source)
    template = Template(source, text, parse_range(text, 0, len(text), registry, compat))
    registry.store(key, template)
    return template


def arg_document(arg: ArgSpan, text: str, registry: MacroRegistry, compat: str) -> Document:
    doc = arg.doc
    if doc is None:
        doc = arg.doc = parse_range(text, arg.start, arg.end, registry, compat)
    return doc
