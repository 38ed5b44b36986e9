"""The STscript parser: SillyTavern 1.18's grammar, quirks included.

A script is a root closure: a sequence of items separated by ``|``. Each item is a command
(``/name``), a run shorthand (``/:name``), ``/break``, a comment (``//``, ``/#``, ``/* … *|``),
a parser switch (``/parser-flag``) or plain text, which is skipped. A command is its name, then
named arguments (``key=value``, while the next word looks like one), then the unnamed argument
(the rest of the command). Values are closures (``{: … :}``, run at once when followed by
``()``), quoted strings, lists (``[…]``) or bare words.

The rules that make scripts written for SillyTavern behave the same here:

- named arguments must come first: once the unnamed part has started, ``key=value`` is text;
- the unnamed argument is one trimmed string, except for commands that *split* it into words
  (``/let``, ``/if``, ``/add`` …, up to an optional count after which the rest is one value);
  a leading quoted string loses its quotes unless the command keeps *raw quotes* (``/echo``);
- escaping (``STRICT_ESCAPING``, on in a fresh SillyTavern profile): before a delimiter the
  parser is testing for (``|``, ``{:``, ``:}``, ``"``…), an odd run of backslashes escapes it
  and every pair is one literal backslash; a backslash elsewhere is kept as it is. Without the
  flag a single backslash escapes the delimiter and a ``|`` inside quotes is an error;
- a ``|`` inside ``{{ … }}`` does not end a command;
- error messages and positions are SillyTavern's (``Unknown command at position N: "/x"``).

The parser knows commands only through a lookup (name → :class:`CommandShape`): whether the
command exists, and how its unnamed argument is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tavernkit.errors import ScriptError
from tavernkit.jscompat import JS_WHITESPACE, is_true_boolean, js_trim, js_trim_end, js_trim_start
from tavernkit.stscript.tree import (
    BreakNode,
    ClosureNode,
    CommandNode,
    CommandShape,
    NamedArg,
    UnnamedArg,
    script_error,
)

__all__ = ["PARSER_FLAGS", "Parser", "parse_script"]

#: SillyTavern's parser flags by name (``PARSER_FLAG``): 1 STRICT_ESCAPING, 2 REPLACE_GETVAR.
PARSER_FLAGS = {"STRICT_ESCAPING": 1, "REPLACE_GETVAR": 2}
#: Closures nested deeper than this do not parse (each level is a Python call)
MAX_NESTING = 100
#: What a fresh SillyTavern 1.18 profile ships (``power_user.stscript.parser.flags``).
DEFAULT_FLAGS = {1: True, 2: True}

_WS = frozenset(JS_WHITESPACE)
_WORD = re.compile(r"[A-Za-z0-9_]")
_NAMED_ARG = re.compile(r"[A-Za-z0-9_]+=")
_SPACE = re.compile("[" + re.escape(JS_WHITESPACE) + "]")
_BREAK = re.compile(r"/break(?:\s|\||\Z)")
_BREAKPOINT = re.compile(r"/breakpoint(?:\s|\||\Z)")


class Parser:
    """One parse of one text (a new parser per text: it keeps the position and flags)."""

    def __init__(
        self,
        text: str,
        lookup: Callable[[str], CommandShape | None],
        *,
        flags: dict[int, bool] | None = None,
        verify_names: bool = True,
    ) -> None:
        self.text = text
        self.lookup = lookup
        self.flags = dict(DEFAULT_FLAGS if flags is None else flags)
        self.verify_names = verify_names
        self.index = 0
        self.depth = 0  # 0: the root closure
        self.jumped = False
        # where the trailing white space starts, and where each run of backslashes ends: the
        # tests below run at every character and must not rescan the text
        self._trail = len(text.rstrip(JS_WHITESPACE))
        self._run_end: dict[int, int] = {}
        self._macro_ends: dict[int, int] | None = None

    # -- cursor helpers ---------------------------------------------------------------------

    @property
    def char(self) -> str:
        return self.text[self.index] if self.index < len(self.text) else ""

    @property
    def ahead(self) -> str:
        return self.text[self.index + 1 :]

    @property
    def end_of_text(self) -> bool:
        if self.index >= len(self.text):
            return True
        return self.text[self.index] in _WS and self.index >= self._trail

    def _backslashes(self, at: int) -> int:
        """How many backslashes start at ``at``."""
        text = self.text
        if at >= len(text) or text[at] != "\\":
            return 0
        end = self._run_end.get(at)
        if end is None:
            end = at
            while end < len(text) and text[end] == "\\":
                end += 1
            for i in range(at, end):
                self._run_end[i] = end
        return end - at

    def take(self, length: int = 1) -> str:
        self.jumped = False
        content = self.text[self.index : self.index + length]
        self.index += length
        return content

    def discard_whitespace(self) -> None:
        while self.index < len(self.text) and self.text[self.index] in _WS:
            self.take()

    def error(self, message: str, index: int | None = None) -> ScriptError:
        return script_error(message, self.text, self.index if index is None else index, parser=True)

    @property
    def strict(self) -> bool:
        return bool(self.flags.get(1))

    def _matches(self, sequence: str | re.Pattern[str], at: int) -> bool:
        if isinstance(sequence, str):
            return self.text.startswith(sequence, at)
        return sequence.match(self.text, at) is not None

    def test_symbol(self, sequence: str | re.Pattern[str], offset: int = 0) -> bool:
        """Whether ``sequence`` starts here and is not escaped.

        An escaped delimiter makes the parser step over the (first) escaping backslash, so the
        caller's next ``take`` reads the delimiter (or the next backslash) as text.
        """
        at = self.index + offset + (-1 if self.jumped else 0)
        single = 1 if self.text[at : at + 1] == "\\" else 0
        escapes = self._backslashes(at) if self.strict else single
        if not self._matches(sequence, at + escapes):
            return False
        if escapes == 0:
            return True
        if not self.jumped and offset == 0:
            self.index += 1
            self.jumped = True
        return False

    # -- tests ------------------------------------------------------------------------------

    def test_closure(self) -> bool:
        return self.test_symbol("{:")

    def test_closure_end(self) -> bool:
        if self.depth == 0:
            return self.index >= len(self.text)
        if not self.verify_names:
            if self.index >= len(self.text):
                return True
        elif self.index + 1 >= len(self.text):
            raise self.error(f"Unclosed closure at position {self.index}")
        return self.test_symbol(":}")

    def test_command_end(self) -> bool:
        return self.test_closure_end() or self.test_symbol("|")

    def test_named_argument(self) -> bool:
        return _NAMED_ARG.match(self.text, self.index) is not None

    def test_quoted_value(self) -> bool:
        return self.test_symbol('"')

    def test_list_value(self) -> bool:
        return self.test_symbol("[")

    def test_value(self) -> bool:
        return not self.test_symbol(_SPACE)

    def test_value_end(self) -> bool:
        if self.test_symbol(_SPACE):
            return True
        return self.test_command_end()

    def test_macro(self) -> int:
        """The end of a ``{{ … }}`` starting here (nested pairs counted), or -1."""
        if self._macro_ends is None:
            self._macro_ends = _macro_spans(self.text)
        return self._macro_ends.get(self.index, -1)

    def _take_text(self) -> str:
        """One piece of plain text: a whole macro when one starts here, else one character."""
        if not self.jumped:
            end = self.test_macro()
            if end > 0:
                return self.take(end - self.index)
        return self.take()

    # -- closures ---------------------------------------------------------------------------

    def parse_closure(self, is_root: bool = False) -> ClosureNode:
        if not is_root:
            if self.depth >= MAX_NESTING:
                raise self.error(
                    f"Closures nested deeper than {MAX_NESTING} at position {self.index}"
                )
            self.take(2)  # "{:"
        text_start = self.index
        closure = ClosureNode(source=self.text, is_root=is_root)
        if not is_root:
            self.depth += 1
        inject_pipe = True
        self.discard_whitespace()
        while self.test_named_argument():
            closure.arguments.append(self.parse_named_argument())
            self.discard_whitespace()
        while not self.test_closure_end():
            if self.test_symbol("/*"):
                self.parse_block_comment()
            elif self.test_symbol(re.compile(r"/[/#]")):
                self.parse_comment()
            elif self.test_symbol("/parser-flag "):
                self.parse_parser_flag()
            elif self.test_symbol("/:") and not self.test_symbol(":}", 1):
                node = self.parse_run_shorthand()
                node.inject_pipe = inject_pipe
                closure.executors.append(node)
                inject_pipe = True
            elif self.test_symbol(_BREAKPOINT):
                self.take(len("/breakpoint"))
                while not self.test_command_end():
                    self.take()
            elif self.test_symbol(_BREAK):
                node_b = self.parse_break()
                node_b.inject_pipe = inject_pipe
                closure.executors.append(node_b)
                inject_pipe = True
            elif self.test_symbol("/"):
                node = self.parse_command()
                node.inject_pipe = inject_pipe
                closure.executors.append(node)
                inject_pipe = True
            else:
                while not self.test_command_end():
                    self.take()  # plain text is skipped up to the next "|"
            self.discard_whitespace()
            if self.test_symbol("|"):
                self.take()
                if self.test_symbol("|"):
                    inject_pipe = False
                    self.take()
            self.discard_whitespace()
        closure.raw_text = self.text[text_start : self.index]
        if not is_root:
            self.take(2)  # ":}"
            self.depth -= 1
        if self.test_symbol("()"):
            self.take(2)
            closure.execute_now = True
        return closure

    # -- comments and switches --------------------------------------------------------------

    def parse_comment(self) -> None:
        self.take(2)
        while True:
            if not self.verify_names:
                if self.index >= len(self.text):
                    return
            elif self.end_of_text:
                raise self.error(f"Unclosed comment at position {self.index}")
            if self.test_symbol("|"):
                return
            self.take()

    def parse_block_comment(self) -> None:
        self.take(2)
        while True:
            if self.index >= len(self.text):
                if not self.verify_names:
                    return
                raise self.error(f"Unclosed block comment at position {self.index}")
            if self.test_symbol("*|"):
                break
            if self.test_symbol("/*"):
                self.parse_block_comment()
            self.take()
        self.take(2)

    def parse_parser_flag(self) -> None:
        self.take(len("/parser-flag "))
        values = self.parse_unnamed_argument(split=True)
        if not values:
            return
        flag = values[0].value
        state = values[1].value if len(values) > 1 else ""
        if isinstance(flag, str) and flag in PARSER_FLAGS:
            self.flags[PARSER_FLAGS[flag]] = is_true_boolean(
                state if isinstance(state, str) else ""
            )

    # -- commands ---------------------------------------------------------------------------

    def parse_command(self) -> CommandNode:
        start = self.index + 1
        self.take()  # "/"
        name = ""
        while (
            self.index < len(self.text)
            and self.text[self.index] not in _WS
            and not self.test_command_end()
        ):
            name += self.take()
        self.discard_whitespace()
        shape = self.lookup(name)
        if self.verify_names and shape is None:
            position = self.index - len(name)
            raise self.error(f'Unknown command at position {position}: "/{name}"', position)
        node = CommandNode(
            name=name, shape=shape, start=start, flags=dict(self.flags), source=self.text
        )
        while self.test_named_argument():
            node.named.append(self.parse_named_argument())
            self.discard_whitespace()
        self.discard_whitespace()
        if not self.test_command_end():
            raw_quotes = bool(shape and shape.raw_quotes)
            if raw_quotes:
                raw = next((a for a in node.named if a.name == "raw"), None)
                if raw is not None:
                    value = raw.value if isinstance(raw.value, str) else ""
                    raw_quotes = js_trim(value).lower() not in ("off", "false", "0")
            split = bool(shape and shape.takes_unnamed and shape.split)
            node.unnamed = self.parse_unnamed_argument(
                split=split,
                split_count=shape.split_count if shape else None,
                raw_quotes=raw_quotes,
            )
        node.end = self.index
        self.discard_whitespace()
        return node

    def parse_run_shorthand(self) -> CommandNode:
        start = self.index + 2
        shape = self.lookup("run")
        node = CommandNode(
            name=":", shape=shape, start=start, flags=dict(self.flags), source=self.text
        )
        self.take(2)  # "/:"
        arg_start = self.index
        value = self.parse_quoted_value() if self.test_quoted_value() else self.parse_value()
        node.unnamed = [UnnamedArg(value, arg_start, self.index)]
        self.discard_whitespace()
        while self.test_named_argument():
            node.named.append(self.parse_named_argument())
            self.discard_whitespace()
        self.discard_whitespace()
        if not self.test_command_end():
            raise self.error(f'Unexpected end of command at position {self.index}: "/:"')
        node.end = self.index
        return node

    def parse_break(self) -> BreakNode:
        node = BreakNode(start=self.index + 1, source=self.text)
        self.take(len("/break"))
        self.discard_whitespace()
        if not self.test_command_end():
            node.unnamed = self.parse_unnamed_argument(split=False)
        self.discard_whitespace()
        return node

    # -- values -----------------------------------------------------------------------------

    def parse_named_argument(self) -> NamedArg:
        start = self.index
        key = ""
        while self.index < len(self.text) and _WORD.match(self.text[self.index]):
            key += self.take()
        self.take()  # "="
        value: str | ClosureNode | None = None
        if self.test_closure():
            value = self.parse_closure()
        elif self.test_quoted_value():
            value = self.parse_quoted_value()
        elif self.test_list_value():
            value = self.parse_list_value()
        elif self.test_value():
            value = self.parse_value()
        return NamedArg(key, value, start, self.index)

    def test_quoted_value_end(self) -> bool:
        if self.end_of_text:
            if self.verify_names:
                raise self.error(f"Unexpected end of quoted value at position {self.index}")
            return True
        if not self.verify_names and self.test_closure_end():
            return True
        if self.verify_names and not self.strict and self.test_command_end():
            raise self.error(f"Unexpected end of quoted value at position {self.index}")
        return self.test_symbol('"') or (not self.strict and self.test_command_end())

    def parse_quoted_value(self) -> str:
        self.take()  # opening quote
        value = ""
        while not self.test_quoted_value_end():
            value += self.take()
        self.take()  # closing quote
        return value

    def parse_list_value(self) -> str:
        value = self.take()
        while True:
            if self.end_of_text:
                raise self.error(f"Unexpected end of list value at position {self.index}")
            if self.test_symbol("]"):
                break
            value += self.take()
        value += self.take()
        return value

    def parse_value(self) -> str:
        value = self.take() if self.jumped else ""
        while not self.test_value_end():
            value += self._take_text()
        return value

    def parse_unnamed_argument(
        self, *, split: bool, split_count: int | None = None, raw_quotes: bool = False
    ) -> list[UnnamedArg]:
        value = self.take() if self.jumped else ""
        is_list = split
        values: list[UnnamedArg] = []
        quoted: list[bool] = []
        start = self.index
        if not split and not raw_quotes and self.test_quoted_value():
            q_start = self.index
            values.append(UnnamedArg(self.parse_quoted_value(), q_start, self.index))
            quoted.append(True)
            is_list = True
            start = self.index
        while not self.test_command_end():
            if split and split_count and len(values) >= split_count:
                split = False
                if self.test_quoted_value():
                    q_start = self.index
                    values.append(UnnamedArg(self.parse_quoted_value(), q_start, self.index))
                    quoted.append(True)
                    start = self.index
                    continue
            if self.test_closure():
                is_list = True
                if value:
                    values.append(UnnamedArg(value, start, self.index))
                    quoted.append(False)
                    value = ""
                c_start = self.index
                values.append(UnnamedArg(self.parse_closure(), c_start, self.index))
                quoted.append(False)
                start = self.index
                if split:
                    self.discard_whitespace()
            elif split:
                v_start = self.index
                if self.test_quoted_value():
                    values.append(UnnamedArg(self.parse_quoted_value(), v_start, self.index))
                    quoted.append(True)
                elif self.test_list_value():
                    values.append(UnnamedArg(self.parse_list_value(), v_start, self.index))
                    quoted.append(False)
                elif self.test_value():
                    values.append(UnnamedArg(self.parse_value(), v_start, self.index))
                    quoted.append(False)
                else:
                    raise self.error(f"Unexpected end of unnamed argument at index {self.index}.")
                self.discard_whitespace()
                start = self.index
            else:
                value += self._take_text()
        if is_list and value:
            values.append(UnnamedArg(value, start, self.index))
            quoted.append(False)
        if is_list:
            if values and isinstance(values[0].value, str):
                if not quoted[0]:
                    values[0].value = js_trim_start(values[0].value)
                if not values[0].value:
                    values.pop(0)
                    quoted.pop(0)
            if values and isinstance(values[-1].value, str):
                if not quoted[-1]:
                    values[-1].value = js_trim_end(values[-1].value)
                if not values[-1].value:
                    values.pop()
                    quoted.pop()
            return values
        return [UnnamedArg(js_trim(value), start, self.index)]


def _macro_spans(text: str) -> dict[int, int]:
    """Where each ``{{`` that closes ends (after its ``}}``), pairs matched as nested."""
    ends: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    length = len(text)
    while i < length - 1:
        pair = text[i : i + 2]
        if pair == "{{":
            stack.append(i)
            i += 2
        elif pair == "}}":
            if stack:
                ends[stack.pop()] = i + 2
            i += 2
        else:
            i += 1
    return ends


def parse_script(
    text: str,
    lookup: Callable[[str], CommandShape | None],
    *,
    flags: dict[int, bool] | None = None,
) -> ClosureNode:
    """Parse ``text`` into its root closure; a malformed text raises :class:`ScriptError`
    (``name == "SlashCommandParserError"``)."""
    return Parser(text, lookup, flags=flags).parse_closure(is_root=True)
