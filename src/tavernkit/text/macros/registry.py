"""The macro registry: names (case-insensitive), argument rules and handlers.

Built-in macros and custom ones (plugins, callers) register the same way::

    registry.register("shout", lambda call: call.args[0].upper(), args=1,
                      description="Upper-cases its argument")

A handler receives a :class:`MacroCall` and returns a value; ``None`` becomes ``""``, numbers
print as JavaScript prints them, lists and dicts as JSON (SillyTavern's normalisation).
Argument rules follow SillyTavern's: ``args`` is a count of required arguments or a list of
:class:`ArgSpec` (optional ones last); ``list=True`` accepts any number of extra arguments; with
``strict_args`` (the default) a wrong count or type keeps the macro as written.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from tavernkit.errors import MacroRuntimeError as MacroRuntimeError
from tavernkit.jscompat import (
    is_false_boolean,
    is_true_boolean,
    js_to_number,
    js_trim,
    utf16_len,
)

if TYPE_CHECKING:
    from tavernkit.text.macros.env import MacroEnv
    from tavernkit.text.macros.evaluator import Evaluation

__all__ = [
    "ArgSpec",
    "MacroCall",
    "MacroDef",
    "MacroOptions",
    "MacroRegistry",
    "MacroRuntimeError",
]

ArgType = Literal["string", "integer", "number", "boolean"]
Availability = Literal["all", "default", "st-1.18"]
_NAME = re.compile(r"[a-zA-Z][\w-]*", re.ASCII)
_INTEGER = re.compile(r"-?\d+", re.ASCII)


@dataclass(frozen=True, slots=True)
class ArgSpec:
    name: str
    optional: bool = False
    type: ArgType | tuple[ArgType, ...] = "string"
    default: str | None = None
    description: str = ""


@dataclass(slots=True)
class MacroCall:
    """What a handler sees: the evaluated arguments and a way back into the engine."""

    name: str
    args: list[str]
    unnamed_args: list[str]
    list: list[str] | None
    flags: str
    is_scoped: bool
    evaluation: Evaluation
    _text: str
    _position: int
    _base: int
    _node: Any = None

    @property
    def raw(self) -> str:
        """The text between the braces with the arguments' values in place (rawInner)."""
        return self.evaluation.raw_inner(self._node, self._text, self.args)

    @property
    def global_offset(self) -> int:
        """This macro's offset in the top-level text (UTF-16 units), which seeds ``{{pick}}``."""
        text, position = self._text, self._position
        if self.evaluation.astral(text):
            position = utf16_len(text[:position])
        return self._base + position

    @property
    def env(self) -> MacroEnv:
        return self.evaluation.env

    @property
    def preserve_whitespace(self) -> bool:
        return "#" in self.flags

    def arg(self, index: int, default: str = "") -> str:
        return self.unnamed_args[index] if index < len(self.unnamed_args) else default

    def resolve(self, text: str, offset_delta: int = 0) -> str:
        """Evaluate ``text`` with the same environment (for macros that delay their args)."""
        return self.evaluation.resolve(text, self.global_offset + offset_delta)

    def warn(self, message: str) -> None:
        self.evaluation.warn(f"{{{{{self.name}}}}}: {message}")


Handler = Callable[[MacroCall], Any]
FastHandler = Callable[["MacroEnv"], Any]


@dataclass(slots=True)
class MacroDef:
    name: str
    handler: Handler
    arg_specs: tuple[ArgSpec, ...] = ()
    min_args: int = 0
    max_args: int = 0
    list_min: int | None = None
    list_max: int | None = None
    strict_args: bool = True
    delay_arg_resolution: bool = False
    description: str = ""
    aliases: tuple[str, ...] = ()
    category: str = "misc"
    availability: Availability = "all"
    #: A no-argument, side-effect-free value of the environment: evaluated once per render.
    pure: FastHandler | None = None
    #: Argument counts with which an opening tag may take a ``{{/name}}`` block (None: any
    #: count that leaves room for one more argument, SillyTavern's rule).
    block_arg_counts: tuple[int, ...] | None = None
    alias_of: str | None = None
    #: Whether any argument has a type other than "string" (else type checks are skipped).
    typed: bool = False

    def __post_init__(self) -> None:
        self.typed = any(spec.type != "string" for spec in self.arg_specs)

    @property
    def has_list(self) -> bool:
        return self.list_min is not None

    def args_valid(self, count: int) -> bool:
        if self.list_min is None:
            return self.min_args <= count <= self.max_args
        if count < self.min_args + self.list_min:
            return False
        return self.list_max is None or max(0, count - self.max_args) <= self.list_max

    def accepts_scoped(self, count: int) -> bool:
        """Whether ``{{name args}}content{{/name}}`` may pair: one more argument must fit."""
        if self.list_min is not None:
            return False
        if self.block_arg_counts is not None and count not in self.block_arg_counts:
            return False
        return self.min_args <= count + 1 <= self.max_args

    def type_error(self, values: Sequence[str]) -> str | None:
        for spec, value in zip(self.arg_specs, values, strict=False):
            types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
            if not any(_is_type(value, t) for t in types):
                return f"argument {spec.name!r} expected {'/'.join(types)}, got {value!r}"
        return None


def _is_type(value: str, kind: str) -> bool:
    if kind == "string":
        return True
    text = js_trim(value)
    if kind == "integer":
        return _INTEGER.fullmatch(text) is not None
    if kind == "number":
        number = js_to_number(text)
        return number == number and abs(number) != float("inf")
    if kind == "boolean":
        return is_true_boolean(text) or is_false_boolean(text)
    return False


@dataclass(slots=True)
class _Cache:
    size: int
    data: OrderedDict[tuple[str, str], Any] = field(default_factory=OrderedDict)


class MacroOptions(TypedDict, total=False):
    """:meth:`MacroRegistry.register`'s keyword options. ``args``: a count or the argument
    specs; ``list``: whether (or how many, ``(min, max)``) extra list arguments it takes;
    ``strict_args``: a call with the wrong count or types stays as written (with a warning);
    ``delay_arg_resolution``: arguments reach the handler unevaluated; ``availability``:
    ``"default"`` hides it in compat st-1.18, ``"st-1.18"`` replaces the shared one only there;
    ``pure``: a no-argument, side-effect-free value of the env (evaluated once per render);
    ``block_arg_counts``: the argument counts with which an opening tag may take a
    ``{{/name}}`` block (see :class:`MacroDef`)."""

    args: int | Sequence[ArgSpec | str]
    list: bool | tuple[int, int | None]
    aliases: Sequence[str]
    description: str
    strict_args: bool
    delay_arg_resolution: bool
    category: str
    availability: Availability
    pure: FastHandler | None
    block_arg_counts: tuple[int, ...] | None


class MacroRegistry:
    """Macro definitions by lower-cased name, plus the parse cache that depends on them.

    Which ``{{name}}…{{/name}}`` pairs form a block depends on the registered argument counts,
    so the cache of parsed templates lives here and is cleared whenever a macro is registered.
    """

    def __init__(self, *, cache_size: int = 512) -> None:
        self._macros: dict[str, MacroDef] = {}
        # Definitions that replace the shared one only in compat "st-1.18".
        self._st_only: dict[str, MacroDef] = {}
        self._cache = _Cache(cache_size)
        self.version = 0

    # -- registration ---------------------------------------------------------------------

    def register(
        self,
        name: str,
        handler: Handler,
        **options: Unpack[MacroOptions],
    ) -> MacroDef:
        """Add (or replace) a macro (its options: :class:`MacroOptions`).
        ``availability="default"`` hides it in compat st-1.18."""
        unknown = sorted(set(options) - set(MacroOptions.__annotations__))
        if unknown:
            raise TypeError(f"register() got an unexpected keyword argument {unknown[0]!r}")
        o = options
        args = o.get("args", 0)
        listed = o.get("list", False)
        aliases = o.get("aliases", ())
        availability = o.get("availability", "all")
        name = name.strip()
        if name != "//" and not _NAME.fullmatch(name):
            raise ValueError(f"invalid macro name {name!r}: a letter, then letters/digits/_/-")
        specs: tuple[ArgSpec, ...]
        if isinstance(args, int):
            if args < 0:
                raise ValueError("args must be >= 0")
            specs = tuple(ArgSpec(f"arg{i + 1}") for i in range(args))
        else:
            specs = tuple(ArgSpec(a) if isinstance(a, str) else a for a in args)
        seen_optional = False
        for spec in specs:
            if seen_optional and not spec.optional:
                raise ValueError(f"macro {name!r}: optional arguments must come last")
            seen_optional = seen_optional or spec.optional
        max_args = len(specs)
        min_args = next((i for i, s in enumerate(specs) if s.optional), max_args)
        list_min: int | None
        list_max: int | None
        if listed is True:
            list_min, list_max = 0, None
        elif listed is False:
            list_min = list_max = None
        else:
            list_min, list_max = listed
        definition = MacroDef(
            name=name,
            handler=handler,
            arg_specs=specs,
            min_args=min_args,
            max_args=max_args,
            list_min=list_min,
            list_max=list_max,
            strict_args=o.get("strict_args", True),
            delay_arg_resolution=o.get("delay_arg_resolution", False),
            description=o.get("description", ""),
            aliases=tuple(aliases),
            category=o.get("category", "custom"),
            availability=availability,
            pure=o.get("pure"),
            block_arg_counts=o.get("block_arg_counts"),
        )
        table = self._st_only if availability == "st-1.18" else self._macros
        table[name.lower()] = definition
        for alias in aliases:
            if not _NAME.fullmatch(alias):
                raise ValueError(f"invalid alias {alias!r} for macro {name!r}")
            alias_def = MacroDef(**{**_fields(definition), "name": alias, "alias_of": name})
            table[alias.lower()] = alias_def
        self._changed()
        return definition

    def register_value(
        self,
        name: str,
        getter: FastHandler,
        *,
        aliases: Sequence[str] = (),
        description: str = "",
        category: str = "custom",
        availability: Availability = "all",
    ) -> MacroDef:
        """A macro without arguments whose value is a side-effect-free function of the env."""

        def handler(call: MacroCall) -> Any:
            return getter(call.env)

        return self.register(
            name,
            handler,
            aliases=aliases,
            description=description,
            category=category,
            availability=availability,
            pure=getter,
        )

    def unregister(self, name: str) -> bool:
        key = name.strip().lower()
        removed = self._macros.pop(key, None) is not None
        removed = self._st_only.pop(key, None) is not None or removed
        if removed:
            self._changed()
        return removed

    def _changed(self) -> None:
        self.version += 1
        self._cache.data.clear()

    # -- lookup ---------------------------------------------------------------------------

    def get(self, name: str, compat: str = "default") -> MacroDef | None:
        return self.get_key(name.lower(), compat)

    def get_key(self, key: str, compat: str) -> MacroDef | None:
        """``get`` for a name already lower-cased (the evaluator's hot path)."""
        if compat == "st-1.18":
            definition = self._st_only.get(key) or self._macros.get(key)
            if definition is not None and definition.availability == "default":
                return None
            return definition
        return self._macros.get(key)

    def get_primary(self, name: str, compat: str = "default") -> MacroDef | None:
        definition = self.get(name.strip(), compat)
        if definition is not None and definition.alias_of is not None:
            return self.get(definition.alias_of, compat)
        return definition

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name.lower() in self._macros or name.lower() in self._st_only
        )

    def definitions(self, *, include_aliases: bool = False) -> list[MacroDef]:
        return [d for d in self._macros.values() if include_aliases or d.alias_of is None]

    # -- parse cache ----------------------------------------------------------------------

    def cached(self, key: tuple[str, str]) -> Any:
        data = self._cache.data
        found = data.get(key)
        if found is not None:
            try:  # noqa: SIM105 - contextlib.suppress costs more on this hot path
                data.move_to_end(key)
            except KeyError:  # evicted meanwhile by a render in another thread
                pass
        return found

    def store(self, key: tuple[str, str], value: Any) -> None:
        data = self._cache.data
        data[key] = value
        if len(data) > self._cache.size:
            data.popitem(last=False)

    def clear_cache(self) -> None:
        self._cache.data.clear()


def _fields(definition: MacroDef) -> dict[str, Any]:
    return {name: getattr(definition, name) for name in MacroDef.__slots__}
