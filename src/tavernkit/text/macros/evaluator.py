"""The evaluator: one strict left-to-right, inside-out pass, as SillyTavern 1.18 does it.

Order of evaluation is SillyTavern's, not the product brief's. The brief describes running
every variable macro first and the other macros second; SillyTavern evaluates each macro in
document order, resolving a macro's arguments (inside-out) right before the macro itself, so
``{{getvar::x}}{{setvar::x::1}}`` prints the *old* value of ``x``. Cards and presets written for
SillyTavern depend on that order, so tavernkit follows it in every compat mode; this is a
deliberate deviation from the brief (tested in ``tests/text/test_macros_semantics.py``).

Other rules kept from SillyTavern: unknown macros stay as written with their nested macros
resolved; a wrong argument count keeps the macro as written (with a warning); ``{{if}}``
resolves only the branch it takes; results are normalised (``None`` → ``""``, numbers as
JavaScript prints them); after the pass ``\\{``/``\\}`` are unescaped, a bare ``{{trim}}``
removes itself and the newlines around it, and stray ``{{else}}`` markers vanish.

Additions: a nesting limit (deeper macros stay literal and a warning is recorded; a limit of 0
or less returns the text unrendered), an output-size limit (``LimitExceeded``) and
``skip_side_effects`` (variables are read but never written, local or global).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tavernkit.errors import LimitExceeded, TavernKitError
from tavernkit.text._jscompat import (
    JS_WHITESPACE,
    has_astral,
    is_false_boolean,
    js_json_stringify,
    js_string,
    js_to_number,
    js_trim,
    js_truthy,
)
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.parser import (
    Document,
    MacroNode,
    Template,
    VarNode,
    arg_document,
    parse_template,
)
from tavernkit.text.macros.registry import MacroCall, MacroDef, MacroRegistry, MacroRuntimeError
from tavernkit.text.variables import ReadOnlyVariables, Scope, VariableStore

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "ELSE_MARKER",
    "Evaluation",
    "MacroResult",
    "normalize_result",
    "postprocess",
    "render_macros",
    "substitute_macros",
    "trim_scoped",
]

ELSE_MARKER = "\u0000\u001fELSE\u001f\u0000"
DEFAULT_MAX_OUTPUT_CHARS = 5_000_000
_UNESCAPE = re.compile(r"\\([{}])")
_TRIM = re.compile(r"\{\{trim\}\}", re.IGNORECASE)
_SPACE_TAB = " \t"


@dataclass(frozen=True, slots=True)
class MacroResult:
    """The rendered text and what went wrong on the way (unknown macros are not warnings)."""

    text: str
    warnings: tuple[str, ...] = ()


def normalize_result(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return js_json_stringify(value)
    return js_string(value)


def postprocess(text: str) -> str:
    if "\\" in text:
        text = _UNESCAPE.sub(r"\1", text)
    if "{{" in text:
        text = _remove_bare_trim(text)
    if "\x00" in text:
        text = text.replace(ELSE_MARKER, "")
    return text


def _remove_bare_trim(text: str) -> str:
    """Remove each ``{{trim}}`` with the newlines (``\n`` or ``\r\n``) on both sides of it.

    Same result as SillyTavern's ``/(?:\r?\n)*{{trim}}(?:\r?\n)*/gi``, without that pattern's
    cost of trying the leading newline loop at every position of a long text.
    """
    match = _TRIM.search(text)
    if match is None:
        return text
    out: list[str] = []
    cursor = 0
    while match is not None:
        start, end = match.start(), match.end()
        while start > cursor and text[start - 1] == "\n":
            start -= 1
            if start > cursor and text[start - 1] == "\r":
                start -= 1
        while True:
            if text.startswith("\n", end):
                end += 1
            elif text.startswith("\r\n", end):
                end += 2
            else:
                break
        out.append(text[cursor:start])
        cursor = end
        match = _TRIM.search(text, end)
    out.append(text[cursor:])
    return "".join(out)


def trim_scoped(content: str) -> str:
    """Trim block content and remove the indentation of its first non-blank line from all."""
    if not content:
        return ""
    lines = content.split("\n")
    base = 0
    for line in lines:
        if js_trim(line):
            base = len(line) - len(line.lstrip(_SPACE_TAB))
            break
    if base == 0:
        return js_trim(content)
    out = []
    for line in lines:
        indent = len(line) - len(line.lstrip(_SPACE_TAB))
        out.append(line[base:] if indent >= base else line.lstrip(JS_WHITESPACE))
    return js_trim("\n".join(out))


def _is_falsy(value: object) -> bool:
    return not js_truthy(value) or is_false_boolean(normalize_result(value))


class Evaluation:
    """The state of one render: environment, variable view, warnings, one-shot flags."""

    __slots__ = (
        "astral_texts",
        "base",
        "compat",
        "depth",
        "dynamic",
        "env",
        "max_depth",
        "max_output",
        "memo",
        "original_used",
        "registry",
        "skip_side_effects",
        "template",
        "variables",
        "warnings",
    )

    def __init__(
        self,
        env: MacroEnv,
        registry: MacroRegistry,
        compat: str,
        variables: VariableStore,
        template: Template,
        max_depth: int,
        max_output: int,
        skip_side_effects: bool,
        dynamic: dict[str, object] | None = None,
    ) -> None:
        self.env = env
        self.registry = registry
        self.compat = compat
        self.variables = variables
        self.template = template
        self.max_depth = max_depth
        self.max_output = max_output
        self.skip_side_effects = skip_side_effects
        self.dynamic = dynamic
        self.warnings: list[str] = []
        self.memo: dict[str, str] = {}
        self.astral_texts: dict[str, bool] | None = None
        self.original_used = False
        self.depth = 0
        self.base = 0

    # -- helpers used by handlers ---------------------------------------------------------

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def lookup(self, name: str) -> MacroDef | None:
        return self.registry.get(name, self.compat)

    def resolve(self, text: str, offset: int) -> str:
        """Evaluate ``text`` as its own template whose offsets start at ``offset``."""
        if not text:
            return ""
        template = parse_template(text, self.registry, self.compat)
        saved = self.base
        self.base = offset
        try:
            return postprocess(self.eval_doc(template.doc))
        finally:
            self.base = saved

    def astral(self, text: str) -> bool:
        """Whether offsets in ``text`` need converting to UTF-16 units (memoised per text)."""
        if text.isascii():
            return False
        if self.astral_texts is None:
            self.astral_texts = {}
        found = self.astral_texts.get(text)
        if found is None:
            found = self.astral_texts[text] = has_astral(text)
        return found

    def content_hash(self) -> int:
        template = self.template
        if template.content_hash is None:
            from tavernkit.text.macros.seeding import content_hash

            template.content_hash = content_hash(template.source)
        return template.content_hash

    # -- evaluation -----------------------------------------------------------------------

    def eval_doc(self, doc: Document) -> str:
        if not doc.has_macros:
            first = doc.parts[0] if doc.parts else ""
            return first if isinstance(first, str) else ""
        out: list[str] = []
        append = out.append
        for part in doc.parts:
            if part.__class__ is str:
                append(part)
            elif part.__class__ is MacroNode:
                append(self.eval_macro(part, doc.text))
            else:
                append(self.eval_var(part, doc.text))  # type: ignore[arg-type]
        result = "".join(out)
        if len(result) > self.max_output:
            raise LimitExceeded(
                f"macro output exceeds {self.max_output} characters", source="macro template"
            )
        return result

    def eval_macro(self, node: MacroNode, text: str) -> str:
        if node.keep_raw:
            return text[node.start : node.end]
        if not node.args and node.scoped is None and self.depth < self.max_depth:
            key = node.key
            cached = self.memo.get(key)
            if cached is not None:
                return cached
            if not self.dynamic:
                definition = self.registry.get_key(key, self.compat)
                if definition is not None and definition.pure is not None:
                    # A plain value of the environment: computed once per render.
                    result = self._finish(definition.pure(self.env))
                    self.memo[key] = result
                    return result
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                self.warn(
                    f"macro nesting deeper than {self.max_depth} levels left as written: "
                    f"{text[node.start : node.end][:80]!r}"
                )
                return text[node.start : node.closing_end or node.end]
            return self._call(node, text)
        finally:
            self.depth -= 1

    def _call(self, node: MacroNode, text: str) -> str:
        key = node.key
        dynamic = self.dynamic.get(key) if self.dynamic else None
        definition = None if dynamic is not None else self.registry.get_key(key, self.compat)
        delay = definition is not None and definition.delay_arg_resolution
        registry, compat = self.registry, self.compat
        if delay:
            args = [text[a.start : a.end] for a in node.args]
        else:
            args = [self.eval_doc(arg_document(a, text, registry, compat)) for a in node.args]
        scoped = node.scoped
        if scoped is not None:
            if scoped.start >= scoped.end:
                args.append("")
            elif delay:
                args.append(text[scoped.start : scoped.end])
            else:
                value = self.eval_doc(arg_document(scoped, text, registry, compat))
                args.append(value if "#" in node.flags else trim_scoped(value))
        if definition is None:
            if dynamic is None:
                return self._raw(node, text, args)
            if args:
                self.warn(f"dynamic macro {{{{{node.name}}}}} takes no arguments")
                return self._raw(node, text, args)
            produced: object = dynamic() if callable(dynamic) else dynamic
            return self._finish(produced)
        if not definition.args_valid(len(args)):
            self.warn(
                f"{{{{{node.name}}}}} called with {len(args)} arguments "
                f"(expects {definition.min_args}-{definition.max_args}"
                f"{'+' if definition.has_list else ''})"
            )
            if definition.strict_args:
                return self._raw(node, text, args)
        max_args = definition.max_args
        unnamed = args[:max_args] if len(args) > max_args else args
        if definition.arg_specs:
            problem = definition.type_error(unnamed)
            if problem is not None:
                self.warn(f"{{{{{node.name}}}}}: {problem}")
                if definition.strict_args:
                    return self._raw(node, text, args)
        pure = definition.pure
        try:
            if pure is not None and not args and scoped is None:
                result = self._finish(pure(self.env))
                self.memo[key] = result
                return result
            call = MacroCall(
                name=definition.name,
                args=args,
                unnamed_args=unnamed,
                list=(args[max_args:] if definition.has_list else None),
                flags=node.flags,
                is_scoped=scoped is not None,
                evaluation=self,
                _text=text,
                _position=node.start,
                _base=self.base,
                _node=node,
            )
            return self._finish(definition.handler(call))
        except MacroRuntimeError as exc:
            self.warn(f"{{{{{node.name}}}}}: {exc}")
        except TavernKitError:
            raise
        except Exception as exc:
            self.warn(f"{{{{{node.name}}}}} failed: {type(exc).__name__}: {exc}")
        return self._raw(node, text, args)

    def _finish(self, value: object) -> str:
        result = normalize_result(value)
        post = self.env.post_process
        return post(result) if post is not None else result

    def _raw(self, node: MacroNode, text: str, args: list[str]) -> str:
        return "{{" + self.raw_inner(node, text, args) + "}}"

    @staticmethod
    def raw_inner(node: MacroNode, text: str, args: list[str]) -> str:
        """The inner text with each argument replaced by its value (SillyTavern's rawInner)."""
        spans = [(a.start, a.end) for a in node.args]
        if node.scoped is not None and node.scoped.start < node.scoped.end:
            spans.append((node.scoped.start, node.scoped.end))
        out: list[str] = []
        cursor = node.inner_start
        for (start, end), value in zip(spans, args, strict=False):
            if start >= end:
                continue
            if start > cursor:
                out.append(text[cursor:start])
            out.append(value)
            cursor = end
        if cursor < node.inner_end:
            out.append(text[cursor : node.inner_end])
        return "".join(out)

    def eval_var(self, node: VarNode, text: str) -> str:
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                self.warn(f"macro nesting deeper than {self.max_depth} levels left as written")
                return text[node.start : node.end]
            return self._var(node, text)
        finally:
            self.depth -= 1

    def _var(self, node: VarNode, text: str) -> str:
        store = self.variables
        name = node.name
        scope: Scope = "local" if node.scope == "local" else "global"
        op = node.op
        resolved: list[str] = []

        def value() -> str:
            if not resolved:
                resolved.append(self._var_value(node, text))
            return resolved[0]

        if not op:
            return normalize_result(store.get(name, scope))
        if op == "=":
            store.set(name, value(), scope)
            return ""
        if op == "++":
            return normalize_result(store.inc(name, scope))
        if op == "--":
            return normalize_result(store.dec(name, scope))
        if op == "+=":
            store.add(name, value(), scope)
            return ""
        if op == "-=":
            number = js_to_number(value())
            if number != number:
                self.warn(f'"-=" needs a number, got {value()!r}')
            else:
                store.add(name, -number, scope)
            return ""
        if op == "||":
            current = store.get(name, scope)
            return normalize_result(value() if _is_falsy(current) else current)
        if op == "??":
            if store.has(name, scope):
                return normalize_result(store.get(name, scope))
            return value()
        if op == "||=":
            current = store.get(name, scope)
            if _is_falsy(current):
                store.set(name, value(), scope)
                return value()
            return normalize_result(current)
        if op == "??=":
            if not store.has(name, scope):
                store.set(name, value(), scope)
                return value()
            return normalize_result(store.get(name, scope))
        if op == "==":
            return "true" if normalize_result(store.get(name, scope)) == value() else "false"
        if op == "!=":
            return "true" if normalize_result(store.get(name, scope)) != value() else "false"
        left = js_to_number(store.get(name, scope))
        right = js_to_number(value())
        if left != left or right != right:
            self.warn(f'"{op}" needs numbers, got {store.get(name, scope)!r} and {value()!r}')
            return "false"
        if op == ">":
            return "true" if left > right else "false"
        if op == ">=":
            return "true" if left >= right else "false"
        if op == "<":
            return "true" if left < right else "false"
        return "true" if left <= right else "false"

    def _var_value(self, node: VarNode, text: str) -> str:
        if node.value_span is None:
            return ""
        out: list[str] = []
        for part in node.value_parts:
            if part.__class__ is str:
                out.append(part)
            elif part.__class__ is MacroNode:
                out.append(self.eval_macro(part, text))
            else:
                out.append(self.eval_var(part, text))  # type: ignore[arg-type]
        return js_trim("".join(out))


def _pure_keys(template: Template, registry: MacroRegistry, compat: str) -> tuple[str, ...]:
    keys: dict[str, None] = {}
    for part in template.doc.parts:
        if part.__class__ is str:
            continue
        if part.__class__ is not MacroNode:
            return ()
        node = part
        if node.args or node.scoped is not None or node.keep_raw:
            return ()
        definition = registry.get_key(node.key, compat)
        if definition is None or definition.pure is None:
            return ()
        keys[node.key] = None
    return tuple(keys)


def _render_pure(
    template: Template, keys: tuple[str, ...], env: MacroEnv, registry: MacroRegistry, compat: str
) -> str:
    """Render a template of plain environment values, reusing the last output when they match."""
    values = []
    for key in keys:
        definition = registry.get_key(key, compat)
        assert definition is not None and definition.pure is not None
        values.append(normalize_result(definition.pure(env)))
    signature = tuple(values)
    last = template.last
    if last is not None and last[0] == signature:
        return last[1]
    lookup = dict(zip(keys, signature, strict=True))
    pieces = [
        part if part.__class__ is str else lookup[part.key]  # type: ignore[union-attr]
        for part in template.doc.parts
    ]
    out = postprocess("".join(pieces))
    template.last = (signature, out)
    return out


_DEFAULT: list[MacroRegistry] = []


def _default_registry() -> MacroRegistry:
    if not _DEFAULT:
        from tavernkit.text.macros.builtins import default_registry

        _DEFAULT.append(default_registry())
    return _DEFAULT[0]


def render_macros(
    text: str,
    env: MacroEnv,
    *,
    skip_side_effects: bool = False,
    max_depth: int = 10,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    registry: MacroRegistry | None = None,
    compat: str | None = None,
) -> MacroResult:
    """Evaluate the macros in ``text``; the result carries the warnings of the render."""
    out, warnings = _render(
        text, env, skip_side_effects, max_depth, max_output_chars, registry, compat
    )
    return MacroResult(out, tuple(warnings))


def _render(
    text: str,
    env: MacroEnv,
    skip_side_effects: bool,
    max_depth: int,
    max_output_chars: int,
    registry: MacroRegistry | None,
    compat: str | None,
) -> tuple[str, list[str]]:
    if not text:
        return "", []
    if max_depth <= 0:
        return text, ["max_depth <= 0: macros left unrendered"]
    if registry is None:
        registry = _default_registry()
    mode = compat or env.compat
    template = parse_template(text, registry, mode)
    if not template.doc.has_macros and template.text is text:
        return (postprocess(text) if "\\" in text else text), []
    if env.post_process is None and not env.dynamic_macros and max_depth >= 1:
        keys = template.pure_keys
        if keys is None:
            keys = template.pure_keys = _pure_keys(template, registry, mode)
        if keys:
            out = _render_pure(template, keys, env, registry, mode)
            if len(out) > max_output_chars:
                raise LimitExceeded(
                    f"macro output exceeds {max_output_chars} characters", source="macro template"
                )
            return out, []
    variables: VariableStore = env.variables
    if skip_side_effects:
        variables = ReadOnlyVariables(variables)
    evaluation = Evaluation(
        env=env,
        registry=registry,
        compat=mode,
        variables=variables,
        template=template,
        max_depth=max_depth,
        max_output=max_output_chars,
        skip_side_effects=skip_side_effects,
        dynamic={k.lower(): v for k, v in env.dynamic_macros.items()}
        if env.dynamic_macros
        else None,
    )
    return postprocess(evaluation.eval_doc(template.doc)), evaluation.warnings


def substitute_macros(
    text: str,
    env: MacroEnv,
    *,
    skip_side_effects: bool = False,
    max_depth: int = 10,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    registry: MacroRegistry | None = None,
    compat: str | None = None,
) -> str:
    """Evaluate the macros in ``text`` with ``env`` (the one entry point of the project)."""
    return _render(text, env, skip_side_effects, max_depth, max_output_chars, registry, compat)[0]
