"""Building models from our own stored JSON without running pydantic's validators.

A stored record was validated when it entered the store; reading it back through
``model_validate`` on every load spends most of its time in the Python wrap validators of
:class:`~tavernkit.models._base.WireModel` (key order, spelling), called once per nested model —
about 75 µs per lorebook entry. :func:`from_stored` builds the same model directly.

It cannot change content: a class is built directly only when everything validation would do
to it is known here (a per-class plan of plain field types: ``str``, ``int``, ``float``,
``bool``, ``None``, ``Any``, ``list[...]``, ``dict[str, ...]``, unions of those and nested
plannable models, with no constraints and no validators but WireModel's own), and each value
is taken only when its JSON type is exactly the field's (``type(v) is int``, no coercion). Any
other value — a ``"5"`` for an int, a ``1`` for a bool, a key spelled by attribute name — makes
the whole record go through ``model_validate`` as before, so the result is always the one
validation gives (``tests/models/test_trusted.py`` checks model, fields set, private state and
``to_wire`` against ``model_validate`` for every stored kind).
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from tavernkit.errors import NotPlannable, NotTrusted
from tavernkit.models._base import WireModel
from tavernkit.models.lorebook import _AliasedWireModel

__all__ = ["from_stored", "plannable"]

_M = TypeVar("_M", bound=BaseModel)

#: A converter: the value as validation would produce it, or raises :class:`NotTrusted`.
_Conv = Callable[[Any], Any]


#: model_config keys that do not change what validation produces from JSON input.
_NEUTRAL_CONFIG = frozenset(
    {
        "extra",
        "populate_by_name",
        "validate_by_name",
        "validate_by_alias",
        "serialize_by_alias",
        "alias_generator",
        "title",
        # only exact JSON types are taken here, and strict mode accepts those too
        "strict",
    }
)

_PLANS: dict[type[BaseModel], _Plan | None] = {}


def from_stored(cls: type[_M], data: Any) -> _M:
    """``cls.model_validate(data)`` for JSON read back from our store, built directly where
    that provably gives the same model (see the module docstring)."""
    plan = _plan_of(cls)
    if plan is not None and type(data) is dict:
        try:
            return plan.build(data)  # type: ignore[no-any-return]
        except NotTrusted:
            pass
    return cls.model_validate(data)


def plannable(cls: type[BaseModel]) -> bool:
    """Whether :func:`from_stored` can build ``cls`` without validation (for tests)."""
    return _plan_of(cls) is not None


def _plan_of(cls: type[BaseModel]) -> _Plan | None:
    if cls in _PLANS:
        return _PLANS[cls]
    _PLANS[cls] = None  # a recursive model stays unplanned rather than looping
    try:
        plan: _Plan | None = _Plan(cls)
    except NotPlannable:
        plan = None
    _PLANS[cls] = plan
    return plan


def _trusted_validators() -> frozenset[Any]:
    wire = WireModel.__pydantic_decorators__.model_validators["_remember_key_order"].func
    aliased = _AliasedWireModel.__pydantic_decorators__.model_validators
    funcs = (wire, aliased["_extras_are_not_fields"].func)
    return frozenset(getattr(f, "__func__", f) for f in funcs)


class _Field:
    __slots__ = ("annotation", "conv", "default", "factory", "key", "name", "required")

    def __init__(self, name: str, info: FieldInfo, conv: _Conv) -> None:
        self.name = name
        self.key = info.alias or name
        self.conv = conv
        self.annotation = info.annotation
        self.factory = info.default_factory
        self.default = info.default
        #: missing from the input: validation must say so
        self.required = self.factory is None and self.default is PydanticUndefined
        if self.factory is not None and info.default_factory_takes_validated_data:
            raise NotPlannable(f"factory of {name} reads the data")


class _Plan:
    """How to build one model class directly."""

    def __init__(self, cls: type[BaseModel]) -> None:
        if not issubclass(cls, WireModel):
            raise NotPlannable("not a WireModel")
        if not set(cls.model_config) <= _NEUTRAL_CONFIG or cls.model_config.get("extra") != "allow":
            raise NotPlannable("config")
        decorators = cls.__pydantic_decorators__
        if decorators.field_validators or decorators.validators or decorators.root_validators:
            raise NotPlannable("field validators")
        trusted = _trusted_validators()
        if any(
            getattr(d.func, "__func__", d.func) not in trusted
            for d in decorators.model_validators.values()
        ):
            raise NotPlannable("model validators")
        post_init = cls.model_post_init
        # pydantic's own hook that only fills private attributes (set up below) is fine
        if getattr(post_init, "__qualname__", "") != "init_private_attributes":
            raise NotPlannable("model_post_init")
        self.cls = cls
        self.fields: list[_Field] = []
        for name, info in cls.model_fields.items():
            mode = _union_mode(info)
            if info.discriminator is not None or info.validate_default:
                raise NotPlannable(f"constraints on {name}")
            self.fields.append(_Field(name, info, _converter(info.annotation, mode)))

        self.build: Callable[[dict[str, Any]], Any] = self._compile()

    def _compile(self) -> Callable[[dict[str, Any]], Any]:
        # Generated straight-line code, as dataclasses does for __init__: a loop over ~40
        # field descriptions per lorebook entry would cost as much as validation itself.
        env: dict[str, Any] = {
            "MISSING": _MISSING,
            "Reject": NotTrusted,
            "new": self.cls.__new__,
            "cls": self.cls,
            "setattr": _set,
            "KEYS": frozenset(f.key for f in self.fields),
            # attribute names that differ from their JSON key: input spelled so is validated
            "NAMES": frozenset(f.name for f in self.fields if f.key != f.name),
            "PRIVATE": _private_defaults(self.cls),
        }
        # Every field starts at its default (a copy of one template dict keeps the declared
        # order); fields the data has overwrite theirs.
        template: dict[str, Any] = {}
        lines = ["def build(data):", "    values = TEMPLATE.copy()"]
        for i, f in enumerate(self.fields):
            name, key = repr(f.name), repr(f.key)
            template[f.name] = f.default if type(f.default) in _IMMUTABLE else None
            lines += [f"    v = data.get({key}, MISSING)", "    if v is MISSING:"]
            if f.required:
                lines.append(f"        raise Reject({key})")
            elif f.factory is not None:
                env[f"F{i}"] = _fresh(f.factory)  # type: ignore[arg-type]  # takes no data
                lines.append(f"        values[{name}] = F{i}()")
            elif type(f.default) in _IMMUTABLE:
                lines.append("        pass")
            else:
                env[f"D{i}"] = f.default
                lines.append(f"        values[{name}] = deepcopy(D{i})")
                env["deepcopy"] = copy.deepcopy
            lines.append("    else:")
            exact = _exact_types(f.annotation)
            if exact is not None:
                env[f"T{i}"] = exact
                lines += [f"        if type(v) not in T{i}:", f"            raise Reject({key})"]
                lines.append(f"        values[{name}] = v")
            else:
                env[f"C{i}"] = f.conv
                lines.append(f"        values[{name}] = C{i}(v)")
        env["TEMPLATE"] = template
        env["NAME_OF"] = {f.key: f.name for f in self.fields}
        lines += [
            # the fields set, by C-level set operations rather than a line per field
            "    present = data.keys() & KEYS",
            "    fs = set(map(NAME_OF.__getitem__, present))",
            "    if len(present) != len(data):",
            "        extra = {k: x for k, x in data.items() if k not in KEYS}",
            "        if not NAMES.isdisjoint(extra):",
            "            raise Reject('spelled by attribute name')",
            # pydantic counts the extra keys among the fields set
            "        fs.update(extra)",
            "    else:",
            "        extra = {}",
            "    obj = new(cls)",
            "    setattr(obj, '__dict__', values)",
            "    setattr(obj, '__pydantic_fields_set__', fs)",
            "    setattr(obj, '__pydantic_extra__', extra)",
            "    private = PRIVATE.copy()",
            "    private['_key_order'] = tuple(data)",
            "    setattr(obj, '__pydantic_private__', private)",
            "    return obj",
        ]
        exec("\n".join(lines), env)  # our own generated code: no input text goes into it
        return env["build"]  # type: ignore[no-any-return]


def _private_defaults(cls: type[BaseModel]) -> dict[str, Any]:
    """The private attributes' defaults, shared by every instance built: so only immutable
    ones (WireModel's key order and spelling); a mutable or factory default is refused."""
    out: dict[str, Any] = {}
    for name, attr in (cls.__private_attributes__ or {}).items():
        default = attr.get_default()
        if attr.default_factory is not None or type(default) not in _IMMUTABLE:
            raise NotPlannable(f"private attribute {name}")
        out[name] = default
    return out


_MISSING = object()
_IMMUTABLE = frozenset({int, float, str, bool, type(None), tuple, frozenset})
_SCALARS = frozenset({str, int, float, bool})
_STR = frozenset({str})


def _exact_types(annotation: Any) -> tuple[type, ...] | None:
    """The JSON types a field of plain scalars takes as they are (``Number | None`` ->
    ``(int, float, NoneType)``), or None when its values need a converter."""
    members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    out: list[type] = []
    for m in members:
        if m is None or m is type(None):
            out.append(type(None))
        elif m in _SCALARS:
            out.append(m)
        else:
            return None
    return tuple(out)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _fresh(factory: Callable[[], Any]) -> Callable[[], Any]:
    """The factory, or for a model class the direct build of ``{}`` (what ``Model()`` gives:
    no fields set, empty key order) without going through validation."""
    if isinstance(factory, type) and issubclass(factory, BaseModel):
        plan = _plan_of(factory)
        if plan is not None:
            return lambda: plan.build({})
    return factory


_set = object.__setattr__


def _union_mode(info: FieldInfo) -> str | None:
    """The field's ``union_mode``; any other constraint (``ge``, ``pattern``...) is refused."""
    mode = None
    for item in info.metadata:
        if type(item).__name__ == "_PydanticGeneralMetadata" and set(vars(item)) == {"union_mode"}:
            mode = str(vars(item)["union_mode"])
        else:
            raise NotPlannable(f"constraint {item!r}")
    return mode


def _exact(t: type) -> _Conv:
    def conv(v: Any) -> Any:
        if type(v) is not t:
            raise NotTrusted(t.__name__)
        return v

    return conv


def _none(v: Any) -> Any:
    if v is not None:
        raise NotTrusted("None")
    return v


def _any(v: Any) -> Any:
    return v


def _converter(annotation: Any, union_mode: str | None = None) -> _Conv:
    if annotation is Any:
        return _any
    if annotation is None or annotation is type(None):
        return _none
    if annotation in (str, int, float, bool):
        return _exact(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list and len(args) == 1:
        return _list_of(args[0])
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict_of(args[1])
    if _is_union(annotation):
        return _union_of(args, union_mode)
    if origin is typing.Literal and all(type(a) in (str, int) for a in args):
        return _literal(args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        plan = _plan_of(annotation)
        if plan is None:
            raise NotPlannable(f"model {annotation.__name__}")
        return _model(plan)
    raise NotPlannable(f"annotation {annotation!r}")


def _literal(allowed: tuple[Any, ...]) -> _Conv:
    exact = frozenset((type(a), a) for a in allowed)

    def conv(v: Any) -> Any:
        if (type(v), v) not in exact:
            raise NotTrusted("literal")
        return v

    return conv


def _of_type(t: type, rebuild: Callable[[Any], Any]) -> _Conv:
    """A converter taking exactly a ``t`` (a JSON list or object) and rebuilding it."""

    def conv(v: Any) -> Any:
        if type(v) is not t:
            raise NotTrusted(t.__name__)
        return rebuild(v)

    return conv


def _model(plan: _Plan) -> _Conv:
    return _of_type(dict, lambda v: plan.build(v))


def _list_of(item: Any) -> _Conv:
    if item is str:

        def strings(v: Any) -> Any:
            if type(v) is not list or not _STR.issuperset(map(type, v)):
                raise NotTrusted("list[str]")
            return list(v)

        return strings
    conv = _converter(item)
    return _of_type(list, lambda v: [conv(x) for x in v])


def _dict_of(value: Any) -> _Conv:
    if value is Any:
        return _of_type(dict, dict)
    conv = _converter(value)
    return _of_type(dict, lambda v: {k: conv(x) for k, x in v.items()})


def _union_of(args: tuple[Any, ...], union_mode: str | None) -> _Conv:
    # Values are taken only on an exact type, so at most one scalar member matches and smart
    # mode picks it too. A dict could match a model and a dict member: only the declared
    # left-to-right order says which wins, so anything else is left to validation.
    convs = [_converter(a) for a in args]
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    dicts = [a for a in args if typing.get_origin(a) is dict or a is dict]
    if len(models) + len(dicts) > 1 and (union_mode != "left_to_right" or args[0] not in models):
        raise NotPlannable("ambiguous union")
    first_model = _converter(args[0]) if models and args[0] in models else None

    def conv(v: Any) -> Any:
        if first_model is not None and type(v) is dict:
            # A nested record this path refuses might still validate as the model (with a
            # coercion), which would win over the dict member: leave it to validation.
            return first_model(v)
        for c in convs:
            try:
                return c(v)
            except NotTrusted:
                continue
        raise NotTrusted("union")

    return conv
