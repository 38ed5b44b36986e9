"""Compiling skips an entry that holds a value JSON cannot hold, and only such entries."""

from __future__ import annotations

from typing import Any

import pytest

from tavernkit.models.lorebook import Lorebook
from tavernkit.worldinfo.compile import compile_book


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"x": [value]}
    return value


@pytest.mark.parametrize(
    ("extra", "kept"),
    [
        ({"nested": {"a": [1, 2.5, None, True, "s", {"b": []}]}}, True),
        ({"tuple": (1, 2)}, False),
        ({"set": {1, 2}}, False),
        ({"nested": {"a": [{"b": object()}]}}, False),
        ({"int_key": {1: "x"}}, False),
        ({"deep": _nested(31, "leaf")}, True),  # 62 levels of containers
        ({"too_deep": _nested(40, "leaf")}, False),  # 80 levels
    ],
)
def test_an_entry_with_a_non_json_value_is_skipped(extra: dict[str, Any], kept: bool) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding.", **extra}}}
    compiled = compile_book("Coast", book)
    assert (len(compiled.entries) == 1) is kept
    assert any("not JSON" in w for w in compiled.warnings) is not kept


def test_a_model_book_is_json_by_construction_and_compiles_the_same() -> None:
    raw = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "Ding.", "n": {"a": [1]}}}}
    from_model = compile_book("Coast", Lorebook.model_validate(raw))
    from_dict = compile_book("Coast", raw)
    assert [e.wire for e in from_model.entries] == [e.wire for e in from_dict.entries]
    assert from_model.digest == from_dict.digest


class _ClaimsEquality(type):
    """A metaclass whose classes claim to equal any type (``int == Odd`` is ``True``)."""

    def __eq__(cls, other: object) -> bool:
        return True

    __hash__ = type.__hash__


class _Odd(metaclass=_ClaimsEquality):
    pass


def test_a_value_whose_type_claims_to_be_another_is_not_json() -> None:
    # Entries of one size are checked field by field; a field's values are compared with its
    # first value's type by identity, so an object of a type claiming equality is caught.
    book = {
        "entries": {
            "0": {"uid": 0, "key": ["bell"], "content": "Ding.", "n": 1},
            "1": {"uid": 1, "key": ["horn"], "content": "Toot.", "n": _Odd()},
        }
    }
    assert int == _Odd  # noqa: E721 - the equality the check must not be fooled by
    compiled = compile_book("Coast", book)
    assert [e.uid for e in compiled.entries] == [0]
    assert any("entry Coast.1: holds a value that is not JSON" in w for w in compiled.warnings)
