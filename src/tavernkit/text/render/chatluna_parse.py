"""ChatLuna's template dialect, parsed: the text lexer, the tag parser and the expression grammar.

This is the newest engine of ChatLuna's ``@chatluna/shared-prompt-renderer`` (lexer, parser
and evaluator "v2"), as the research notes in the brief's reference describe it:

- text: ``{{`` is a literal ``{`` and ``}}`` a literal ``}`` (independent escapes, checked
  before tags); a lone ``}`` stays; a ``{`` opens a tag that runs to its matching ``}``
  (braces nest; inside quotes braces do not count and a backslash skips a character). A tag
  with no closing brace is text.
- tags: ``if``/``for``/``while``/``repeat`` (the keyword and a space) open blocks closed by
  ``{/if}`` ... ; ``{elseif c}`` and ``{else}`` split an if. Anything else is an expression; a
  tag whose expression does not parse is kept as written (so JSON such as ``{"a": 1}``
  survives). A ``for`` without `` in `` is text. A malformed block condition is an error.
- expressions: ``?:``, ``||``, ``&&``, ``== !=`` (strict), ``< > <= >=``, ``+ -``, ``* / %``,
  unary ``! - +``, member ``.name``, index ``[e]``, calls ``f(a, b)``; strings in ``'`` or
  ``"`` (escapes ``\\n \\t \\r``, any other ``\\x`` is ``x``), numbers (digits with an optional
  fraction), ``true``/``false``/``null``, identifiers ``[A-Za-z_$][A-Za-z0-9_$]*``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tavernkit.errors import ExprError

__all__ = [
    "Binary",
    "Block",
    "Call",
    "Expression",
    "ForBlock",
    "Identifier",
    "IfBlock",
    "Index",
    "Literal",
    "Member",
    "Node",
    "RepeatBlock",
    "Ternary",
    "Text",
    "Unary",
    "WhileBlock",
    "parse_expression",
    "parse_template",
]


# -- expression AST ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: object


@dataclass(frozen=True, slots=True)
class Identifier:
    name: str


@dataclass(frozen=True, slots=True)
class Member:
    target: Expr
    name: str


@dataclass(frozen=True, slots=True)
class Index:
    target: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class Call:
    callee: Expr
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Ternary:
    condition: Expr
    then: Expr
    otherwise: Expr


Expr = Literal | Identifier | Member | Index | Call | Unary | Binary | Ternary


# -- template AST -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Expression:
    expr: Expr
    raw: str


@dataclass(slots=True)
class IfBlock:
    #: (condition, body) for the if and each elseif, in order
    branches: list[tuple[Expr, list[Node]]] = field(default_factory=list)
    otherwise: list[Node] | None = None


@dataclass(slots=True)
class ForBlock:
    name: str
    iterable: Expr
    body: list[Node] = field(default_factory=list)


@dataclass(slots=True)
class WhileBlock:
    condition: Expr
    body: list[Node] = field(default_factory=list)


@dataclass(slots=True)
class RepeatBlock:
    count: Expr
    body: list[Node] = field(default_factory=list)


Block = IfBlock | ForBlock | WhileBlock | RepeatBlock
Node = Text | Expression | Block


# -- lexing the template ----------------------------------------------------------------------


def _lex(source: str) -> list[tuple[bool, str]]:
    """``(is_tag, text)`` pieces: text with escapes applied, or a tag's content."""
    pieces: list[tuple[bool, str]] = []
    text: list[str] = []
    n = len(source)
    i = 0
    while i < n:
        if source.startswith("{{", i):
            text.append("{")
            i += 2
            continue
        if source.startswith("}}", i):
            text.append("}")
            i += 2
            continue
        char = source[i]
        if char != "{":
            text.append(char)
            i += 1
            continue
        end = _tag_end(source, i + 1)
        if end < 0:  # no closing brace: the rest is text
            text.append(source[i:])
            break
        if text:
            pieces.append((False, "".join(text)))
            text = []
        pieces.append((True, source[i + 1 : end]))
        i = end + 1
    if text:
        pieces.append((False, "".join(text)))
    return pieces


def _tag_end(source: str, start: int) -> int:
    depth = 1
    quote = ""
    i = start
    n = len(source)
    while i < n:
        char = source[i]
        if quote:
            if char == "\\":
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


# -- parsing the template ---------------------------------------------------------------------

_OPENERS = ("if ", "for ", "while ", "repeat ")


def parse_template(source: str) -> list[Node]:
    """The template's nodes; a malformed block condition raises :class:`ExprError`."""
    pieces = _lex(source)
    nodes, _, _ = _parse_nodes(pieces, 0, frozenset())
    return nodes


def _parse_nodes(
    pieces: list[tuple[bool, str]], pos: int, stops: frozenset[str]
) -> tuple[list[Node], int, str | None]:
    """Nodes up to one of ``stops`` (a closer such as ``/if``, or ``elseif``/``else``);
    returns the stop met (its tag content) or ``None`` at the end of the template."""
    nodes: list[Node] = []
    while pos < len(pieces):
        is_tag, text = pieces[pos]
        pos += 1
        if not is_tag:
            nodes.append(Text(text))
            continue
        content = text.strip()
        keyword = content.split(" ", 1)[0]
        if content in stops or (keyword == "elseif" and "elseif" in stops):
            return nodes, pos, content
        if content.startswith(_OPENERS):
            block, pos = _parse_block(pieces, pos, content, text)
            nodes.append(block)
            continue
        try:
            nodes.append(Expression(parse_expression(content), text))
        except ExprError:
            nodes.append(Text("{" + text + "}"))
    return nodes, pos, None


def _parse_block(
    pieces: list[tuple[bool, str]], pos: int, content: str, raw: str
) -> tuple[Node, int]:
    keyword, _, rest = content.partition(" ")
    if keyword == "if":
        block = IfBlock()
        condition = parse_expression(rest)
        while True:
            body, pos, stop = _parse_nodes(pieces, pos, frozenset({"/if", "else", "elseif"}))
            if block.otherwise is not None:
                block.otherwise.extend(body)
            else:
                block.branches.append((condition, body))
            if stop is None or stop == "/if":
                return block, pos
            if stop == "else":
                block.otherwise = []
            elif block.otherwise is None:
                condition = parse_expression(stop.partition(" ")[2])
    if keyword == "for":
        name, sep, iterable = rest.partition(" in ")
        if not sep:
            return Text("{" + raw + "}"), pos
        expr = parse_expression(iterable)
        body, pos, _ = _parse_nodes(pieces, pos, frozenset({"/for"}))
        return ForBlock(name.strip(), expr, body), pos
    condition = parse_expression(rest)
    closer = "/" + keyword
    body, pos, _ = _parse_nodes(pieces, pos, frozenset({closer}))
    if keyword == "while":
        return WhileBlock(condition, body), pos
    return RepeatBlock(condition, body), pos


# -- expressions ------------------------------------------------------------------------------

_TWO_CHAR = frozenset({"==", "!=", "<=", ">=", "&&", "||"})
_ONE_CHAR = frozenset("+-*/%!<>?:.[](),")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def _is_ident_start(char: str) -> bool:
    return char == "_" or char == "$" or ("a" <= char <= "z") or ("A" <= char <= "Z")


def _is_ident_part(char: str) -> bool:
    return _is_ident_start(char) or "0" <= char <= "9"


def _tokens(source: str) -> list[tuple[str, object]]:
    """``(kind, value)`` tokens: ``str`` (a string literal), ``num``, ``id``, ``op``."""
    out: list[tuple[str, object]] = []
    i = 0
    n = len(source)
    while i < n:
        char = source[i]
        if char in " \t\r\n":
            i += 1
        elif char in "'\"":
            i, value = _string(source, i)
            out.append(("str", value))
        elif "0" <= char <= "9":
            start = i
            while i < n and "0" <= source[i] <= "9":
                i += 1
            if i + 1 < n and source[i] == "." and "0" <= source[i + 1] <= "9":
                i += 1
                while i < n and "0" <= source[i] <= "9":
                    i += 1
            out.append(("num", float(source[start:i])))
        elif _is_ident_start(char):
            start = i
            while i < n and _is_ident_part(source[i]):
                i += 1
            out.append(("id", source[start:i]))
        elif source[i : i + 2] in _TWO_CHAR:
            out.append(("op", source[i : i + 2]))
            i += 2
        elif char in _ONE_CHAR:
            out.append(("op", char))
            i += 1
        else:
            raise ExprError(f"unexpected character {char!r}")
    return out


def _string(source: str, start: int) -> tuple[int, str]:
    quote = source[start]
    out: list[str] = []
    i = start + 1
    while i < len(source):
        char = source[i]
        if char == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if char == quote:
            return i + 1, "".join(out)
        out.append(char)
        i += 1
    raise ExprError("unterminated string")


class _Parser:
    def __init__(self, tokens: list[tuple[str, object]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, value: str) -> bool:
        return self.pos < len(self.tokens) and self.tokens[self.pos] == ("op", value)

    def take(self, value: str) -> bool:
        if self.peek(value):
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.take(value):
            raise ExprError(f"expected {value!r}")

    def ternary(self) -> Expr:
        condition = self.binary(0)
        if self.take("?"):
            then = self.ternary()
            self.expect(":")
            return Ternary(condition, then, self.ternary())
        return condition

    _LEVELS: tuple[frozenset[str], ...] = (
        frozenset({"||"}),
        frozenset({"&&"}),
        frozenset({"==", "!="}),
        frozenset({"<", ">", "<=", ">="}),
        frozenset({"+", "-"}),
        frozenset({"*", "/", "%"}),
    )

    def binary(self, level: int) -> Expr:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        ops = self._LEVELS[level]
        while self.pos < len(self.tokens):
            kind, value = self.tokens[self.pos]
            if kind != "op" or value not in ops:
                break
            self.pos += 1
            left = Binary(str(value), left, self.binary(level + 1))
        return left

    def unary(self) -> Expr:
        for op in ("!", "-", "+"):
            if self.take(op):
                return Unary(op, self.unary())
        return self.postfix(self.primary())

    def postfix(self, expr: Expr) -> Expr:
        while True:
            if self.take("."):
                if self.pos >= len(self.tokens) or self.tokens[self.pos][0] != "id":
                    raise ExprError("expected a property name")
                expr = Member(expr, str(self.tokens[self.pos][1]))
                self.pos += 1
            elif self.take("["):
                index = self.ternary()
                self.expect("]")
                expr = Index(expr, index)
            elif self.take("("):
                args: list[Expr] = []
                if not self.take(")"):
                    args.append(self.ternary())
                    while self.take(","):
                        args.append(self.ternary())
                    self.expect(")")
                expr = Call(expr, tuple(args))
            else:
                return expr

    def primary(self) -> Expr:
        if self.pos >= len(self.tokens):
            raise ExprError("unexpected end of expression")
        kind, value = self.tokens[self.pos]
        self.pos += 1
        if kind in ("str", "num"):
            return Literal(value)
        if kind == "id":
            if value == "true":
                return Literal(True)
            if value == "false":
                return Literal(False)
            if value == "null":
                return Literal(None)
            return Identifier(str(value))
        if value == "(":
            inner = self.ternary()
            self.expect(")")
            return inner
        raise ExprError(f"unexpected {value!r}")


def parse_expression(source: str) -> Expr:
    """One expression; anything left over (or a character outside the grammar) is an
    :class:`ExprError`."""
    tokens = _tokens(source)
    if not tokens:
        raise ExprError("empty expression")
    parser = _Parser(tokens)
    expr = parser.ternary()
    if parser.pos != len(tokens):
        raise ExprError("unexpected token after expression")
    return expr
