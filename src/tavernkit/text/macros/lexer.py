"""The macro lexer: finds where each ``{{…}}`` starts and ends, and what is inside it.

It follows the lexer modes of SillyTavern 1.18's chevrotain grammar (plaintext → macro
definition → identifier end → arguments / variable shorthand → value) so that the places
where a macro ends, or turns out not to be one, are the same as SillyTavern's:

- ``{{`` opens a macro; in a run of braces the last two open it (``{{{user}}}`` is
  ``{`` + macro + ``}``);
- after ``{{`` come optional flags ``! ? ~ # / >`` and white space, then ``//`` (comment), a
  variable shorthand ``.name``/``$name``, or an identifier;
- a character that fits nowhere ends the macro attempt and the text is plain again from
  there (``{{ 5 }}`` stays text);
- arguments end at the first ``}}`` that is not inside a nested macro, or at the end of the
  text (then the macro is incomplete).

The scanner works on index ranges of one string (no slicing), so offsets stay absolute; an
argument's span is trimmed to its first and last token, exactly like the token locations
SillyTavern slices arguments by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tavernkit.jscompat import JS_WHITESPACE

__all__ = ["RawMacro", "scan_document", "scan_macro", "simple_document"]

_WS = frozenset(JS_WHITESPACE)
_FLAGS = frozenset("!?~#/>")
_IDENT = re.compile(r"[a-zA-Z][\w-]*", re.ASCII)
_VAR_IDENT = re.compile(r"[a-zA-Z](?:[\w-]*\w)?", re.ASCII)
# One argument token: a run without braces, pipes, colons, backslashes or white space.
_ARG_RUN = re.compile("[^{}|:\\\\" + re.escape(JS_WHITESPACE) + "]+")
_VAR_OPS = ("??=", "??", "||=", "||", "-=", "==", "!=", ">=", ">", "<=", "<", "+=", "=")
# The common shapes lexed by one regex instead of the character loop (both give the same
# RawMacro; anything unusual goes the long way): ``{{name}}``, ``{{/name}}`` (one flag),
# ``{{name::a::b}}``, ``{{name arg}}`` / ``{{name:arg}}``, ``{{// comment}}``, ``{{.var}}``,
# ``{{.var++}}``. No braces, pipes or backslashes inside.
_SIMPLE = re.compile(r"\{\{([!?~#/>]?)([a-zA-Z][\w-]*)([^{}|\\]*)\}\}", re.ASCII)
_SIMPLE_COMMENT = re.compile(r"\{\{//([^{}|\\]*)\}\}")
_SIMPLE_VAR = re.compile(r"\{\{([.$])([a-zA-Z](?:[\w-]*\w)?)(\+\+|--)?\}\}", re.ASCII)


@dataclass(slots=True)
class RawMacro:
    """One ``{{…}}`` as the lexer saw it; ``complete`` is False when it is not a macro.

    ``end`` is where plain text resumes (after ``}}`` when one closed it). An incomplete macro
    stays text, but the complete macros nested inside it (``nested``) are still evaluated.
    """

    start: int
    end: int
    complete: bool
    flags: str = ""
    name: str = ""
    inner_start: int = 0
    inner_end: int = 0
    args: list[tuple[int, int]] = field(default_factory=list)
    nested: list[RawMacro] = field(default_factory=list)
    is_var: bool = False
    var_scope: str = ""
    var_op: str = ""
    value_span: tuple[int, int] | None = None
    lexer_errors: int = 0


def scan_document(text: str, start: int, end: int) -> list[RawMacro]:
    """The complete top-level macros of ``text[start:end]`` in order (incomplete ones flattened)."""
    found: list[RawMacro] = []
    pos = start
    find = text.find
    while True:
        k = find("{{", pos, end)
        if k < 0:
            return found
        while k + 2 < end and text[k + 2] == "{":
            k += 1
        macro = scan_macro(text, k, end)
        if macro.complete:
            found.append(macro)
        else:
            found.extend(macro.nested)
        pos = macro.end


def simple_document(
    text: str, start: int, end: int
) -> list[tuple[int, int, str, str, list[tuple[int, int]]]] | None:
    """The macros of ``text[start:end]`` when every ``{{`` in it opens a plain ``_SIMPLE``
    macro (``{{name}}``, ``{{/name}}``, ``{{name::a::b}}``, ``{{name arg}}``): per macro its
    start, end, flags, name and argument spans, exactly what :func:`scan_document` and
    ``_scan_simple`` give, found by one pass of the regex; ``None`` when anything else is
    there (a brace run, a comment, a variable, a nested or unusual macro: the long way)."""
    find = text.find
    if find("{{{", start, end) >= 0 or find("{{.", start, end) >= 0 or find("{{$", start, end) >= 0:
        return None
    found: list[tuple[int, int, str, str, list[tuple[int, int]]]] = []
    cursor = start
    for m in _SIMPLE.finditer(text, start, end):
        if find("{{", cursor, m.start()) >= 0:
            return None  # an opening the regex skipped: the long way decides it
        cursor = m.end()
        rest_start, rest_end = m.start(3), m.end(3)
        args: list[tuple[int, int]] = []
        if rest_start != rest_end:
            lead = text[rest_start]
            if lead != ":" and lead not in _WS:
                return None
            spans = _simple_args(text, rest_start, rest_end)
            if spans is None:
                return None
            args = spans
        found.append((m.start(), m.end(), m.group(1), m.group(2), args))
    if find("{{", cursor, end) >= 0:
        return None
    return found


def _incomplete(start: int, end: int, nested: list[RawMacro]) -> RawMacro:
    return RawMacro(start=start, end=end, complete=False, nested=nested)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _WS:
        start += 1
    while end > start and text[end - 1] in _WS:
        end -= 1
    return start, end


def _simple_args(text: str, start: int, end: int) -> list[tuple[int, int]] | None:
    """The argument spans of ``text[start:end]`` as ``_scan_args`` gives them, for the easy
    cases; None when the long way must decide (empty arguments, a lone leading colon)."""
    first, last = _trimmed(text, start, end)
    if first == last:
        return []
    if text.startswith("::", first):
        spans: list[tuple[int, int]] = []
        cursor = first + 2
        while True:
            stop = text.find("::", cursor, end)
            seg_end = end if stop < 0 else stop
            s, e = _trimmed(text, cursor, seg_end)
            if s == e:
                return None
            spans.append((s, e))
            if stop < 0:
                return spans
            cursor = stop + 2
    if text[first] == ":":
        return None
    return [(first, last)]


def _scan_simple(text: str, i: int, end: int) -> RawMacro | None:
    if text.startswith("{{//", i):
        m = _SIMPLE_COMMENT.match(text, i, end)
        if m is None:
            return None
        comment = _simple_args(text, m.start(1), m.end(1))
        if comment is None:
            return None
        stop = m.end()
        return RawMacro(i, stop, True, "", "//", i + 2, stop - 2, comment)
    c = text[i + 2 : i + 3]
    if c == "." or c == "$":
        m = _SIMPLE_VAR.match(text, i, end)
        if m is None:
            return None
        stop = m.end()
        return RawMacro(
            i, stop, True, "", m.group(2), i + 2, stop - 2, is_var=True, var_scope=c,
            var_op=m.group(3) or "",
        )  # fmt: skip
    m = _SIMPLE.match(text, i, end)
    if m is None:
        return None
    rest_start, rest_end = m.start(3), m.end(3)
    args: list[tuple[int, int]] = []
    if rest_start != rest_end:
        lead = text[rest_start]
        if lead != ":" and lead not in _WS:
            return None  # a character the identifier end drops (a lexer error)
        found = _simple_args(text, rest_start, rest_end)
        if found is None:
            return None
        args = found
    stop = m.end()
    return RawMacro(i, stop, True, m.group(1), m.group(2), i + 2, stop - 2, args)


def scan_macro(text: str, i: int, end: int) -> RawMacro:
    """Lex the macro opened by the ``{{`` at ``i``; stop at ``end`` (the end of the text)."""
    simple = _scan_simple(text, i, end)
    if simple is not None:
        return simple
    pos = i + 2
    flags: list[str] = []
    nested: list[RawMacro] = []
    body: RawMacro | None = None
    ok = True
    errors = 0
    while True:
        if pos >= end:
            return _incomplete(i, end, nested)
        c = text[pos]
        if c == "}" and pos + 1 < end and text[pos + 1] == "}":
            if body is None or not ok:
                return _incomplete(i, pos + 2, nested)
            body.start, body.end, body.flags = i, pos + 2, "".join(flags)
            body.inner_start, body.inner_end = i + 2, pos
            body.nested = nested
            body.lexer_errors = errors
            return body
        if c in _WS:
            pos += 1
            continue
        if c == "/" and pos + 1 < end and text[pos + 1] == "/":
            ok = ok and body is None
            body, pos, errs = _scan_args(text, pos + 2, end, "//", nested)
            errors += errs
            ok = ok and body.complete
            continue
        if c == "." or c == "$":
            ok = ok and body is None
            body, pos = _scan_var(text, pos, end, nested)
            ok = ok and body.complete
            continue
        if c in _FLAGS:
            if body is not None:
                ok = False
            flags.append(c)
            pos += 1
            continue
        m = _IDENT.match(text, pos, end)
        if m is None:
            # Nothing fits: the lexer leaves macro mode and the text is plain from here.
            return _incomplete(i, pos, nested)
        ok = ok and body is None
        name = m.group()
        pos = m.end()
        # Identifier end: white space, ':', '|' or '}' start the arguments; '}}' ends the
        # macro; any other character is a lexer error that is dropped (SillyTavern too).
        while pos < end:
            c = text[pos]
            if c == "}" and pos + 1 < end and text[pos + 1] == "}":
                break
            if c in _WS or c in ":|}":
                break
            errors += 1
            pos += 1
        if pos >= end:
            return _incomplete(i, end, nested)
        if c == "}" and pos + 1 < end and text[pos + 1] == "}":
            body = RawMacro(start=i, end=0, complete=True, name=name)
            continue
        body, pos, errs = _scan_args(text, pos, end, name, nested)
        errors += errs
        ok = ok and body.complete


def _scan_args(
    text: str, pos: int, end: int, name: str, nested: list[RawMacro]
) -> tuple[RawMacro, int, int]:
    """The argument mode; returns at ``}}`` (not consumed) or at the end of the text."""
    # tokens: (kind, start, end); kind 'd' = '::', 'c' = ':', 'x' = anything else.
    tokens: list[tuple[str, int, int]] = []
    broken = False
    while pos < end:
        c = text[pos]
        if c == "{":
            if pos + 1 < end and text[pos + 1] == "{":
                sub = scan_macro(text, pos, end)
                if sub.complete:
                    nested.append(sub)
                else:
                    nested.extend(sub.nested)
                tokens.append(("x", pos, sub.end))
                pos = sub.end
                continue
            tokens.append(("x", pos, pos + 1))
            pos += 1
        elif c == "}":
            if pos + 1 < end and text[pos + 1] == "}":
                break
            tokens.append(("x", pos, pos + 1))
            pos += 1
        elif c == ":":
            if pos + 1 < end and text[pos + 1] == ":":
                tokens.append(("d", pos, pos + 2))
                pos += 2
            else:
                tokens.append(("c", pos, pos + 1))
                pos += 1
        elif c == "|":
            # Output filters (`|`) are lexed by SillyTavern but no rule accepts them.
            broken = True
            pos += 1
        elif c == "\\":
            if pos + 1 < end and text[pos + 1] == "|":
                broken = True
                pos += 2
            else:
                tokens.append(("x", pos, pos + 1))
                pos += 1
        elif c in _WS:
            pos += 1
        else:
            m = _ARG_RUN.match(text, pos, end)
            stop = m.end() if m else pos + 1
            tokens.append(("x", pos, stop))
            pos = stop
    macro = RawMacro(start=0, end=0, complete=not broken and pos < end, name=name)
    if tokens:
        if tokens[0][0] == "d":
            spans: list[tuple[int, int]] = []
            seg_start = -1
            seg_end = tokens[0][2]
            for kind, s, e in tokens[1:]:
                if kind == "d":
                    spans.append((seg_start, seg_end) if seg_start >= 0 else (s, s))
                    seg_start = -1
                    seg_end = e
                    continue
                if seg_start < 0:
                    seg_start = s
                seg_end = e
            spans.append((seg_start, seg_end) if seg_start >= 0 else (seg_end, seg_end))
            macro.args = spans
        else:
            first = 1 if tokens[0][0] == "c" else 0
            if first >= len(tokens):
                macro.complete = False
            else:
                macro.args = [(tokens[first][1], tokens[-1][2])]
    return macro, pos, 0


def _scan_var(text: str, pos: int, end: int, nested: list[RawMacro]) -> tuple[RawMacro, int]:
    """Variable shorthand: ``.name`` / ``$name``, optional operator and value."""
    macro = RawMacro(start=0, end=0, complete=True, is_var=True, var_scope=text[pos])
    pos += 1
    while pos < end and text[pos] in _WS:
        pos += 1
    m = _VAR_IDENT.match(text, pos, end)
    if m is None:
        macro.complete = False
        return macro, pos
    macro.name = m.group()
    pos = m.end()
    ops: list[str] = []
    while True:
        while pos < end and text[pos] in _WS:
            pos += 1
        if pos >= end:
            macro.complete = False
            return macro, pos
        pair = text[pos : pos + 2]
        if pair == "++" or pair == "--":
            ops.append(pair)
            pos += 2
            continue
        op = next((o for o in _VAR_OPS if text.startswith(o, pos)), None)
        if op is None:
            break
        ops.append(op)
        pos += len(op)
        pos = _scan_var_value(text, pos, end, nested, macro)
        break
    if len(ops) > 1:
        macro.complete = False
    elif ops:
        macro.var_op = ops[0]
    return macro, pos


def _scan_var_value(text: str, pos: int, end: int, nested: list[RawMacro], macro: RawMacro) -> int:
    first = -1
    last = -1
    while pos < end:
        c = text[pos]
        if c == "}" and pos + 1 < end and text[pos + 1] == "}":
            break
        if c == "{" and pos + 1 < end and text[pos + 1] == "{":
            sub = scan_macro(text, pos, end)
            if sub.complete:
                nested.append(sub)
            else:
                nested.extend(sub.nested)
            if first < 0:
                first = pos
            last = sub.end
            pos = sub.end
            continue
        if c not in _WS:
            if first < 0:
                first = pos
            last = pos + 1
        pos += 1
    macro.value_span = (first, last) if first >= 0 else None
    return pos
