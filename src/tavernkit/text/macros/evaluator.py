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

Speed: templates are parsed once per registry and compat (the parse cache), and each node keeps
what is a pure function of its text — its argument values when they hold no macro, the result
of its argument-count check, and for ``{{if}}`` the condition and branches already split and
parsed — so a warm render evaluates macros without lexing or parsing anything again.

Renderer names: an ``overlay`` (see :class:`MacroOverlay`) lays per-render variables and
function providers over the registry; ``used`` collects the names a render called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tavernkit.errors import LimitExceeded, TavernKitError
from tavernkit.jscompat import (
    has_astral,
    js_trim,
)
from tavernkit.text.macros.builtins import default_registry
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.macros.output import ELSE_MARKER, normalize_result, postprocess, trim_scoped
from tavernkit.text.macros.parser import (
    Document,
    MacroNode,
    Template,
    VarNode,
    arg_document,
    parse_template,
)
from tavernkit.text.macros.registry import MacroCall, MacroDef, MacroRegistry, MacroRuntimeError
from tavernkit.text.macros.seeding import content_hash
from tavernkit.text.macros.shorthand import eval_shorthand
from tavernkit.text.variables import ReadOnlyVariables, VariableStore

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "ELSE_MARKER",
    "Evaluation",
    "MacroOverlay",
    "MacroResult",
    "RenderRules",
    "normalize_result",
    "postprocess",
    "render_macros",
    "substitute_macros",
    "trim_scoped",
]

DEFAULT_MAX_OUTPUT_CHARS = 5_000_000
#: Control flow and comments: not among the names a render reports as used (``used``).
_NOT_REPORTED = frozenset({"if", "else", "//", "comment", "trim", "noop"})


class MacroOverlay(Protocol):
    """Names that a caller supplies on top of the registry for one render (the renderer's
    variables and function providers). They shadow the registry's macros of the same name.

    ``function(key, argc)`` returns the callable for the lower-cased name ``key`` called with
    ``argc`` arguments (a scoped block's content counts as one), or None when the overlay has
    nothing for that call; the callable gets the evaluated arguments and records its own name.
    """

    def function(self, key: str, argc: int) -> Callable[[list[str]], object] | None: ...

    def handles(self, key: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class MacroResult:
    """The rendered text and what went wrong on the way (unknown macros are not warnings)."""

    text: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderRules:
    """How one render runs: the macro dialect (``compat``), how deep nested macros may go
    (``max_depth``) and how long the output may grow (``max_output``, characters), and whether
    macros with side effects (variable writes) are skipped."""

    compat: str
    max_depth: int
    max_output: int
    skip_side_effects: bool


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
        "overlay",
        "registry",
        "skip_side_effects",
        "template",
        "used",
        "variables",
        "warnings",
    )

    def __init__(
        self,
        env: MacroEnv,
        registry: MacroRegistry,
        variables: VariableStore,
        template: Template,
        rules: RenderRules,
        dynamic: dict[str, object] | None = None,
        overlay: MacroOverlay | None = None,
        used: dict[str, None] | None = None,
    ) -> None:
        self.env = env
        self.registry = registry
        self.compat = rules.compat
        self.variables = variables
        self.template = template
        self.max_depth = rules.max_depth
        self.max_output = rules.max_output
        self.skip_side_effects = rules.skip_side_effects
        self.dynamic = dynamic
        self.overlay = overlay
        self.used = used
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

    def resolve_template(self, template: Template, offset: int) -> str:
        """``resolve`` for a template parsed already (handlers keep them per node)."""
        saved = self.base
        self.base = offset
        try:
            return postprocess(self.eval_doc(template.doc))
        finally:
            self.base = saved

    def template_of(self, text: str) -> Template:
        return parse_template(text, self.registry, self.compat)

    def astral(self, text: str) -> bool:
        """Whether offsets in ``text`` need converting to UTF-16 units (memoised per text)."""
        if text.isascii():
            return False
        template = self.template
        if text is template.text:
            # The top-level text (usually the long one): kept on the cached template.
            if template.astral is None:
                template.astral = has_astral(text)
            return template.astral
        if self.astral_texts is None:
            self.astral_texts = {}
        found = self.astral_texts.get(text)
        if found is None:
            found = self.astral_texts[text] = has_astral(text)
        return found

    def content_hash(self) -> int:
        template = self.template
        if template.content_hash is None:
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
            overlay = self.overlay
            if not self.dynamic and (overlay is None or not overlay.handles(key)):
                definition = self.registry.get_key(key, self.compat)
                if definition is not None and definition.pure is not None:
                    # A plain value of the environment: computed once per render.
                    result = self._finish(definition.pure(self.env))
                    self.memo[key] = result
                    if self.used is not None and definition.name not in _NOT_REPORTED:
                        self.used.setdefault(definition.name)
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
        overlay = self.overlay
        if overlay is not None:
            function = overlay.function(key, len(node.args) + (node.scoped is not None))
            if function is not None:
                return self._call_overlay(node, text, function)
        dynamic = self.dynamic.get(key) if self.dynamic else None
        definition = None if dynamic is not None else self.registry.get_key(key, self.compat)
        delay = definition is not None and definition.delay_arg_resolution
        if delay:
            args = [text[a.start : a.end] for a in node.args]
        elif node.literal_args is not None:
            args = list(node.literal_args)
        else:
            args = self._eval_args(node, text)
        scoped = node.scoped
        if scoped is not None:
            if scoped.start >= scoped.end:
                args.append("")
            elif delay:
                args.append(text[scoped.start : scoped.end])
            else:
                value = self.eval_doc(arg_document(scoped, text, self.registry, self.compat))
                args.append(value if "#" in node.flags else trim_scoped(value))
        if definition is None:
            if dynamic is None:
                return self._raw(node, text, args)
            if args:
                self.warn(f"dynamic macro {{{{{node.name}}}}} takes no arguments")
                return self._raw(node, text, args)
            produced: object = dynamic() if callable(dynamic) else dynamic
            return self._finish(produced)
        if node.ready is definition:
            pass  # the argument count was checked on an earlier evaluation
        elif definition.args_valid(len(args)):
            node.ready = definition
        else:
            self.warn(
                f"{{{{{node.name}}}}} called with {len(args)} arguments "
                f"(expects {definition.min_args}-{definition.max_args}"
                f"{'+' if definition.has_list else ''})"
            )
            if definition.strict_args:
                return self._raw(node, text, args)
        max_args = definition.max_args
        unnamed = args[:max_args] if len(args) > max_args else args
        if definition.typed:
            problem = definition.type_error(unnamed)
            if problem is not None:
                self.warn(f"{{{{{node.name}}}}}: {problem}")
                if definition.strict_args:
                    return self._raw(node, text, args)
        pure = definition.pure
        if self.used is not None and definition.name not in _NOT_REPORTED:
            self.used.setdefault(definition.name)
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

    def _eval_args(self, node: MacroNode, text: str) -> list[str]:
        registry, compat = self.registry, self.compat
        args: list[str] = []
        literal = True
        for span in node.args:
            doc = span.doc
            if doc is None:
                doc = arg_document(span, text, registry, compat)
            if doc.has_macros:
                literal = False
                args.append(self.eval_doc(doc))
            else:
                parts = doc.parts
                args.append(parts[0] if parts else "")  # type: ignore[arg-type]
        if literal:
            node.literal_args = tuple(args)
        return args

    def _call_overlay(
        self, node: MacroNode, text: str, function: Callable[[list[str]], object]
    ) -> str:
        registry, compat = self.registry, self.compat
        args = self._eval_args(node, text)
        scoped = node.scoped
        if scoped is not None:
            if scoped.start >= scoped.end:
                args.append("")
            else:
                value = self.eval_doc(arg_document(scoped, text, registry, compat))
                args.append(value if "#" in node.flags else trim_scoped(value))
        try:
            return self._finish(function(args))
        except MacroRuntimeError as exc:
            self.warn(f"{{{{{node.name}}}}}: {exc}")
        except TavernKitError:
            raise
        except Exception as exc:
            self.warn(f"{{{{{node.name}}}}} failed: {type(exc).__name__}: {exc}")
        return self._raw(node, text, args)

    def _finish(self, value: object) -> str:
        post = self.env.post_process
        if value.__class__ is str and post is None:
            return value
        result = normalize_result(value)
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
            return eval_shorthand(self, node, text)
        finally:
            self.depth -= 1

    def var_value(self, node: VarNode, text: str) -> str:
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
    overlay: MacroOverlay | None = None,
    used: dict[str, None] | None = None,
) -> MacroResult:
    """Evaluate the macros in ``text``; the result carries the warnings of the render.

    ``overlay`` adds per-render names on top of the registry (the renderer's variables and
    function providers); ``used`` collects the names of the macros the render called, in
    first-seen order (control flow and comments left out).
    """
    out, warnings = _render(
        text, env, skip_side_effects, max_depth, max_output_chars, registry, compat, overlay, used
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
    overlay: MacroOverlay | None = None,
    used: dict[str, None] | None = None,
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
        if keys and (overlay is None or not any(overlay.handles(k) for k in keys)):
            if used is not None:
                for key in keys:
                    definition = registry.get_key(key, mode)
                    if definition is not None and definition.name not in _NOT_REPORTED:
                        used.setdefault(definition.name)
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
        variables=variables,
        template=template,
        rules=RenderRules(mode, max_depth, max_output_chars, skip_side_effects),
        dynamic={k.lower(): v for k, v in env.dynamic_macros.items()}
        if env.dynamic_macros
        else None,
        overlay=overlay,
        used=used,
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
