"""ChatLuna's template dialect, parsed: the text lexer, the tag parser and the expression grammar.

As ``@chatluna/shared-prompt-renderer`` 1.0.5 (the engine of koishi-plugin-chatluna 1.3.36)
reads a template:

- text: ``{{`` is a literal ``{`` and ``}}`` a literal ``}`` (independent escapes, checked
  before tags); a lone ``}`` stays; a ``{`` opens a tag that runs to its matching ``}``
  (braces nest; inside quotes braces do not count and a backslash skips a character). A tag
  with no closing brace is text (``{`` and the rest of the template).
- tags, on their content trimmed as JavaScript trims (every Unicode space): ``if``/``for``/
  ``while``/``repeat`` followed by an ASCII space open blocks closed by ``{/if}`` ... (an
  unclosed block takes the rest of the template). Inside an if, ``{elseif c}`` opens another
  branch and ``{else}`` the alternative, in any order: an elseif after an else is one more
  elseif (tried before the alternative), a second else starts the alternative afresh. Anything
  else is an expression; a tag whose expression does not parse stays as written (so JSON such
  as ``{"a": 1}`` survives), and ``{for ...}`` without `` in `` is text. A block header that
  does not parse is an error (:class:`ExprError`): ChatLuna's render rejects.
- expressions: ``?:``, ``||``, ``&&``, ``== !=`` (strict), ``< > <= >=``, ``+ -``,
  ``* / %``, unary ``! - +``, member ``.name``, index ``[e]``, calls ``f(a, b)``; strings in
  ``'`` or ``"`` (escapes ``\\n \\t \\r``, any other ``\\x`` is ``x``), numbers (digits, then
  ``.`` and optional digits), ``true``/``false``/``null``, identifiers
  ``[A-Za-z_$][A-Za-z0-9_$]*``; white space is any Unicode space. Error messages are
  ChatLuna's (``Unexpected token: {"type":"eof"}``).

The parser recurses two Python frames per nested parenthesis and none per operator of a chain
(``1 + 2 + ... + 500`` is a loop), so deep but legal templates parse within Python's stack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tavernkit.errors import ExprError
from tavernkit.jscompat import JS_WHITESPACE, js_number_to_string, js_trim

__all__ = [
    "Binary",
    "Block",
    "Call",
    "Expr",
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
    """A call; an :class:`Identifier` callee is a function provider's name."""

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
    #: (condition, body) for the if and each elseif, in source order
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
    """``(is_tag, text)`` pieces: text with escapes applied (adjacent text merged), or a tag's
    content."""
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


class _TemplateParser:
    def __init__(self, pieces: list[tuple[bool, str]]) -> None:
        self.pieces = pieces
        self.pos = 0

    def nodes_until(self, closer: str | None) -> list[Node]:
        """Nodes up to the tag ``closer`` (consumed) or the end of the template."""
        nodes: list[Node] = []
        while self.pos < len(self.pieces):
            is_tag, text = self.pieces[self.pos]
            if closer is not None and is_tag and js_trim(text) == closer:
                self.pos += 1
                break
            nodes.append(self.node())
        return nodes

    def node(self) -> Node:
        is_tag, text = self.pieces[self.pos]
        self.pos += 1
        if not is_tag:
            return Text(text)
        content = js_trim(text)
        if content.startswith("if "):
            return self.if_block(content)
        if content.startswith("for "):
            return self.for_block(content)
        if content.startswith("while "):
            condition = parse_expression(content[6:])
            return WhileBlock(condition, self.nodes_until("/while"))
        if content.startswith("repeat "):
            count = parse_expression(content[7:])
            return RepeatBlock(count, self.nodes_until("/repeat"))
        try:
            return Expression(parse_expression(content), text)
        except ExprError:
            return Text("{" + text + "}")

    def if_block(self, header: str) -> IfBlock:
        block = IfBlock()
        current: list[Node] = []
        block.branches.append((parse_expression(header[3:]), current))
        while self.pos < len(self.pieces):
            is_tag, text = self.pieces[self.pos]
            tag = js_trim(text) if is_tag else ""
            if is_tag and tag == "/if":
                self.pos += 1
                break
            if is_tag and tag.startswith("elseif "):
                self.pos += 1
                current = []
                block.branches.append((parse_expression(tag[7:]), current))
                continue
            if is_tag and tag == "else":
                self.pos += 1
                current = []
                block.otherwise = current
                continue
            current.append(self.node())
        return block

    def for_block(self, header: str) -> Node:
        content = js_trim(header[4:])
        name, sep, iterable = content.partition(" in ")
        if not sep:
            return Text("{" + header + "}")
        expr = parse_expression(iterable)
        return ForBlock(js_trim(name), expr, self.nodes_until("/for"))


def parse_template(source: str) -> list[Node]:
    """The template's nodes; a malformed block header raises :class:`ExprError`."""
    parser = _TemplateParser(_lex(source))
    return parser.nodes_until(None)


# -- expressions ------------------------------------------------------------------------------

_TWO_CHAR = frozenset({"==", "!=", "<=", ">=", "&&", "||"})
_OPERATORS = frozenset("+-*/%<>!")
_PUNCTUATION = frozenset("()[].,?:")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_WHITESPACE = frozenset(JS_WHITESPACE)
#: binary operators by precedence, lowest first
_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    ">": 4,
    "<=": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}

# a token: (kind, value); kinds are ChatLuna's: number, string, identifier, keyword,
# operator, punctuation, eof
Token = tuple[str, object]
_EOF: Token = ("eof", None)


def _is_ident_start(char: str) -> bool:
    return char == "_" or char == "$" or ("a" <= char <= "z") or ("A" <= char <= "Z")


def _is_ident_part(char: str) -> bool:
    return _is_ident_start(char) or "0" <= char <= "9"


def _describe(token: Token) -> str:
    """The token as ChatLuna's message prints it (``JSON.stringify`` of its token object)."""
    kind, value = token
    if kind == "eof":
        return '{"type":"eof"}'
    key = "name" if kind == "identifier" else "value"
    if kind == "number":
        shown = js_number_to_string(float(value))  # type: ignore[arg-type]
    else:
        shown = json.dumps(value, ensure_ascii=False)
    return '{"type":"' + kind + '","' + key + '":' + shown + "}"


def _tokens(source: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    n = len(source)
    while i < n:
        char = source[i]
        if char in _WHITESPACE:
            i += 1
        elif char in "'\"":
            i, text = _string(source, i)
            out.append(("string", text))
        elif "0" <= char <= "9":
            start = i
            while i < n and "0" <= source[i] <= "9":
                i += 1
            if i < n and source[i] == ".":
                i += 1
                while i < n and "0" <= source[i] <= "9":
                    i += 1
            out.append(("number", float(source[start:i].rstrip(".") or "0")))
        elif _is_ident_start(char):
            start = i
            while i < n and _is_ident_part(source[i]):
                i += 1
            word = source[start:i]
            out.append(("keyword" if word in ("true", "false", "null") else "identifier", word))
        elif source[i : i + 2] in _TWO_CHAR:
            out.append(("operator", source[i : i + 2]))
            i += 2
        elif char in _OPERATORS:
            out.append(("operator", char))
            i += 1
        elif char in _PUNCTUATION:
            out.append(("punctuation", char))
            i += 1
        else:
            raise ExprError(f"Unexpected character: {char}")
    return out


def _string(source: str, start: int) -> tuple[int, str]:
    quote = source[start]
    out: list[str] = []
    i = start + 1
    while i < len(source):
        char = source[i]
        if char == "\\":
            nxt = source[i + 1 : i + 2]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if char == quote:
            return i + 1, "".join(out)
        out.append(char)
        i += 1
    raise ExprError("Unterminated string literal")


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else _EOF

    def at(self, kind: str, value: str) -> bool:
        return self.peek() == (kind, value)

    def expect(self, value: str, message: str) -> None:
        if not self.at("punctuation", value):
            raise ExprError(message)
        self.pos += 1

    def expression(self, minimum: int = 1) -> Expr:
        """Binary operators by precedence climbing (a chain of one level is a loop); at the
        lowest level, a trailing ``? :`` makes a conditional (right-nested)."""
        left = self.operand()
        while True:
            kind, value = self.peek()
            level = _PRECEDENCE.get(str(value), 0) if kind == "operator" else 0
            if level < minimum:
                break
            self.pos += 1
            left = Binary(str(value), left, self.expression(level + 1))
        if minimum > 1 or not self.at("punctuation", "?"):
            return left
        self.pos += 1
        then = self.expression()
        self.expect(":", 'Expected ":" in conditional expression')
        return Ternary(left, then, self.expression())

    def operand(self) -> Expr:
        """Prefix operators, a primary and its postfix accessors (one frame for all three)."""
        ops: list[str] = []
        while self.peek()[0] == "operator" and self.peek()[1] in ("!", "-", "+"):
            ops.append(str(self.peek()[1]))
            self.pos += 1
        if self.at("punctuation", "("):  # a group, here rather than in primary: one frame less
            self.pos += 1
            expr = self.expression()
            self.expect(")", 'Expected ")"')
        else:
            expr = self.primary()
        while True:
            if self.at("punctuation", "."):
                self.pos += 1
                kind, value = self.peek()
                if kind != "identifier":
                    raise ExprError('Expected identifier after "."')
                self.pos += 1
                expr = Member(expr, str(value))
            elif self.at("punctuation", "["):
                self.pos += 1
                index = self.expression()
                self.expect("]", 'Expected "]"')
                expr = Index(expr, index)
            elif self.at("punctuation", "("):
                self.pos += 1
                args: list[Expr] = []
                if not self.at("punctuation", ")"):
                    args.append(self.expression())
                    while self.at("punctuation", ","):
                        self.pos += 1
                        args.append(self.expression())
                self.expect(")", 'Expected ")"')
                expr = Call(expr, tuple(args))
            else:
                break
        for op in reversed(ops):
            expr = Unary(op, expr)
        return expr

    def primary(self) -> Expr:
        token = self.peek()
        kind, value = token
        if kind in ("string", "number"):
            self.pos += 1
            return Literal(value)
        if kind == "keyword":
            self.pos += 1
            return Literal({"true": True, "false": False}.get(str(value)))
        if kind == "identifier":
            self.pos += 1
            return Identifier(str(value))
        raise ExprError(f"Unexpected token: {_describe(token)}")


def parse_expression(source: str) -> Expr:
    """One expression; anything left over (or a character outside the grammar) is an
    :class:`ExprError` with ChatLuna's message."""
    parser = _Parser(_tokens(source))
    expr = parser.expression()
    if parser.pos != len(parser.tokens):
        raise ExprError("Unexpected token after expression")
    return expr
