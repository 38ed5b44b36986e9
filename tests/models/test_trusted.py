"""The trusted read path (:func:`from_stored`) gives exactly what ``model_validate`` gives.

For every kind the store keeps, random records shaped by the model's own fields — right types
mostly, wrong JSON types, attribute-name spellings, unknown keys and missing required fields
now and then, keys in any order — must come back equal to the validated model: the same
values, fields set, key order and extras at every level, the same ``to_wire`` JSON byte for
byte, or the same kind of error.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, PrivateAttr, ValidationError

from tavernkit.errors import FormatError, NotTrusted
from tavernkit.models._base import WireModel
from tavernkit.models._trusted import _plan_of, from_stored, plannable
from tavernkit.models.character import Card
from tavernkit.models.lorebook import Lorebook, LoreEntry
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.store import open_store
from tavernkit.store.protocol import KINDS as RECORD_KINDS
from tavernkit.store.registry import default_models

KINDS = default_models()

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=3),
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)


def _typed(annotation: Any, depth: int) -> st.SearchStrategy[Any]:
    """Values of the annotation's JSON types (what a valid record holds)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return st.text(max_size=4)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(-5, 300)
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if annotation is None or annotation is type(None):
        return st.none()
    if origin is typing.Annotated:
        return _typed(args[0], depth)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(_value(args[0], depth), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), _value(args[1], depth), max_size=3)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_typed(a, depth) for a in args])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if depth > 2:
            return st.just({})
        return _record(annotation, depth + 1)
    return _JSON


def _value(annotation: Any, depth: int) -> st.SearchStrategy[Any]:
    """Mostly a well-typed value, now and then any JSON value (a coercion or a refusal)."""
    return st.one_of(_typed(annotation, depth), _typed(annotation, depth), _JSON_SCALARS)


@st.composite
def _record(draw: st.DrawFn, cls: type[BaseModel], depth: int = 0) -> dict[str, Any]:
    items: list[tuple[str, Any]] = []
    for name, info in cls.model_fields.items():
        key = info.alias or name
        if draw(st.booleans()) or (info.is_required() and draw(st.integers(0, 9)) > 0):
            spelled = name if key != name and draw(st.integers(0, 9)) == 0 else key
            items.append((spelled, draw(_value(info.annotation, depth))))
    extras = draw(st.dictionaries(st.text(min_size=1, max_size=4), _JSON, max_size=2))
    items += [(k, v) for k, v in extras.items() if k not in dict(items)]
    order = draw(st.permutations(range(len(items))))
    return {items[i][0]: items[i][1] for i in order}


def _state(model: Any) -> Any:
    """Everything a model holds, at every level: values, fields set, extras, private state."""
    if isinstance(model, BaseModel):
        return (
            type(model),
            {k: _state(v) for k, v in model.__dict__.items()},
            sorted(model.model_fields_set),
            _state(model.__pydantic_extra__),
            model.__pydantic_private__,
        )
    if isinstance(model, dict):
        return {k: _state(v) for k, v in model.items()}
    if isinstance(model, list):
        return [_state(v) for v in model]
    return (type(model), model)


def _assert_same(cls: type[BaseModel], data: dict[str, Any]) -> None:
    try:
        expected = cls.model_validate(data)
    except ValidationError:
        with pytest.raises(ValidationError):
            from_stored(cls, data)
        return
    got = from_stored(cls, data)
    assert got == expected
    assert _state(got) == _state(expected)
    assert list(got.__dict__) == list(expected.__dict__)
    wire = getattr(expected, "to_wire", None)
    if wire is not None:
        assert json.dumps(got.to_wire()) == json.dumps(wire())  # type: ignore[attr-defined]
    assert json.dumps(got.model_dump(mode="json")) == json.dumps(expected.model_dump(mode="json"))


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_stored_kind_reads_back_as_validation_does(kind: str, data: st.DataObject) -> None:
    cls = KINDS[kind]
    _assert_same(cls, data.draw(_record(cls)))


def test_the_models_read_every_turn_take_the_fast_path() -> None:
    # Without a plan every read would fall back to validation and nothing would be gained.
    for cls in (Lorebook, LoreEntry, Card, ChatCompletionPreset):
        assert plannable(cls), cls


def test_a_well_formed_book_is_built_without_validation() -> None:
    book = {
        "entries": {
            "0": {"uid": 0, "key": ["harbour"], "content": "The light.", "order": 100,
                  "probability": 100, "characterFilter": {"isExclude": False, "names": []},
                  "extensions": {"x": [1]}, "futureKey": {"a": 1}},
            "1": {"uid": "1", "key": [], "depth": None, "delayUntilRecursion": 2},
        },
        "name": "Harbour",
        "originalData": {"name": "Harbour", "entries": []},
    }  # fmt: skip
    plan = _plan_of(Lorebook)
    assert plan is not None
    built = plan.build(book)  # raises NotTrusted if any part needed validation
    expected = Lorebook.model_validate(book)
    assert _state(built) == _state(expected)
    assert json.dumps(built.to_wire()) == json.dumps(book)
    # nothing is shared with the stored JSON that an edit of the model could change
    built.entries["0"].keys.append("x")
    built.entries["0"].extensions["y"] = 1
    assert book["entries"]["0"]["key"] == ["harbour"]  # type: ignore[index]
    assert "y" not in book["entries"]["0"]["extensions"]  # type: ignore[index]


@pytest.mark.parametrize(
    "entry",
    [
        {"uid": 0, "constant": 1},  # a 1 for a bool: validation coerces it
        {"uid": 0, "order": "5"},  # a numeric string for a number
        {"uid": 0, "keys": ["by attribute name"]},  # spelled like the attribute
        {"uid": 0, "characterFilter": {"isExclude": "true"}},  # deep coercion
        {"uid": 0, "position": 1.0},  # a float for an int
    ],
)
def test_what_validation_would_change_goes_through_validation(entry: dict[str, Any]) -> None:
    plan = _plan_of(LoreEntry)
    assert plan is not None
    with pytest.raises(NotTrusted):
        plan.build(entry)
    _assert_same(LoreEntry, entry)
    _assert_same(Lorebook, {"entries": {"0": entry}})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_store_reads_every_kind_back_unchanged(data: st.DataObject) -> None:
    """Through a real SQLite store: what was put comes back byte-identical as JSON, and the
    models ``get`` and ``get_shared_record`` build from it are the validated ones."""
    kinds = sorted(set(KINDS) & RECORD_KINDS)  # settings has calls of its own
    records = {kind: data.draw(_record(KINDS[kind]), label=kind) for kind in kinds}

    async def run(folder: Path) -> None:
        async with await open_store(folder / "t.db") as store:
            for kind, record in records.items():
                cls = KINDS[kind]
                try:
                    expected = cls.model_validate(record)
                except ValidationError:
                    continue  # the store refuses it on the way in (tested in tests/store)
                try:
                    ref = await store.put(kind, record, name=f"r-{kind}")
                except FormatError:
                    continue  # a record the JSON document check refuses
                stored = await store.get_record(kind, ref.id)
                assert json.dumps(stored.data) == json.dumps(record)
                got = await store.get(kind, ref.id)
                shared = await store.get_shared_record(kind, ref.id)
                for model in (got, shared.model):
                    assert _state(model) == _state(expected)
                    if isinstance(expected, WireModel):
                        assert isinstance(model, WireModel)
                        assert json.dumps(model.to_wire()) == json.dumps(expected.to_wire())
                assert json.dumps(shared.data) == json.dumps(record)
                assert (shared.id, shared.created) == (stored.info.id, stored.info.created)

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))


def test_a_model_with_a_mutable_private_default_is_left_to_validation() -> None:
    # Its default would be one object shared by every directly built instance.
    class Tracked(WireModel):
        name: str = ""
        _seen: list[str] = PrivateAttr(default_factory=list)

    assert not plannable(Tracked)
    a, b = from_stored(Tracked, {"name": "a"}), from_stored(Tracked, {"name": "b"})
    a._seen.append("x")
    assert b._seen == []
