"""Every syntax form of the engine (lexer + parser), beyond the recorded goldens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.text.macros import MacroEnv, substitute_macros
from tavernkit.text.macros.lexer import scan_document


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{reverse::ab::cd}}", "{{reverse::ab::cd}}"),  # two args: arity error, raw
        ("{{reverse:ab::cd}}", "dc::ba"),  # single colon: one argument
        ("{{reverse ab cd}}", "dc ba"),  # white space: one argument
        ("{{ reverse :: abc }}", "cba"),  # white space around every part
        ("{{REVERSE::abc}}", "cba"),  # case-insensitive names
        ("{{reverse::{{reverse::{{user}}}}}}", "User"),  # nesting inside-out
        ("{{reverse::a\nb}}", "b\na"),  # multi-line arguments
        ("{{ 5 }}", "{{ 5 }}"),  # not an identifier: plain text
        ("{{}}", "{{}}"),
        ("{{user", "{{user"),  # unterminated
        ("{{{user}}}", "{User}"),
        ("\\{\\{user\\}\\}", "{{user}}"),  # escapes
        ("a{{// note}}b", "ab"),
        ("a{{//}}kept{{///}}b", "akeptb"),
        ("{{!user}}{{?user}}{{~user}}", "UserUserUser"),  # flags parsed, no effect
        ("{{unknown::{{user}}}}", "{{unknown::User}}"),
        ("{{reverse::a|b}}", "{{reverse::a|b}}"),  # output filters are not supported
    ],
)
def test_forms(render: Callable[..., str], text: str, expected: str) -> None:
    assert render(text) == expected


def test_blocks_and_closing_tags(render: Callable[..., str]) -> None:
    assert render("{{reverse}}  abc  {{/reverse}}") == "cba"
    assert render("{{#reverse}} abc {{/reverse}}") == " cba "
    assert render("{{/reverse}}") == "{{/reverse}}"
    assert render("{{Reverse}}ab{{/REVERSE}}") == "ba"  # closing tags match any case
    assert render("{{user}}x{{/user}}") == "{{user}}x{{/user}}"  # cannot take content


def test_unknown_block_keeps_sillytaverns_raw_shape(render: Callable[..., str]) -> None:
    # SillyTavern rebuilds an unknown block from the opening tag and the content.
    assert render("{{nope}}{{user}}{{/nope}}") == "{{nope}}User}}"


def test_legacy_markers_and_time(render: Callable[..., str]) -> None:
    assert render("<USER>/<bot>/<CHAR>/<GROUP>/<CHARIFNOTGROUP>") == (
        "User/Character/Character/Character/Character"
    )
    assert render("{{time_UTC+2}}") == "4:07 PM"


def test_lexer_reports_offsets() -> None:
    text = "a {{x::b}} c {{.v += 1}}"
    found = scan_document(text, 0, len(text))
    assert [(m.name, m.start, m.end) for m in found] == [("x", 2, 10), ("v", 13, 24)]
    assert found[1].is_var and found[1].var_op == "+="


@given(st.text(alphabet=st.characters(blacklist_characters="{}\\<")))
def test_text_without_macros_is_unchanged(text: str) -> None:
    assert substitute_macros(text, MacroEnv()) == text


@given(st.text(alphabet="ab{}: /.$|\\\n", max_size=40))
def test_any_text_renders_without_crashing(text: str) -> None:
    assert isinstance(substitute_macros(text, MacroEnv(compat="st-1.18")), str)


# -- the lexer's regex fast path gives what the character loop gives ------------------------

_LEX_ALPHABET = "ab_-:: {}|\\.$#!/+\t\u00a0\u2028xyz12"


def _raw_tuple(raw: Any) -> Any:
    return (
        raw.start,
        raw.end,
        raw.complete,
        raw.flags,
        raw.name,
        raw.inner_start,
        raw.inner_end,
        tuple(raw.args),
        tuple(_raw_tuple(n) for n in raw.nested),
        raw.is_var,
        raw.var_op,
        raw.value_span,
        raw.lexer_errors,
    )


#: templates made of the shapes every lexer path must agree on
_TEMPLATES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "{{",
                "}}",
                "::",
                ":",
                "{{user}}",
                "{{getvar::x}}",
                "{{a:: b ::c}}",
                "{{/if}}",
                "{{#if .x < 3}}",
                "{{// c: d}}",
                "{{//}}",
                "{{.x++}}",
                "{{$y}}",
                "{{.a-b--}}",
                "{{x:y}}",
                "{{x :: }}",
            ]
        ),
        st.text(alphabet=_LEX_ALPHABET, max_size=6),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(_TEMPLATES)
def test_simple_macro_fast_path_matches_the_full_lexer(text: str) -> None:
    from tavernkit.text.macros import lexer

    fast = [_raw_tuple(r) for r in lexer.scan_document(text, 0, len(text))]
    original = lexer._scan_simple
    lexer._scan_simple = lambda *_: None  # type: ignore[assignment]
    try:
        slow = [_raw_tuple(r) for r in lexer.scan_document(text, 0, len(text))]
    finally:
        lexer._scan_simple = original
    assert fast == slow


@settings(max_examples=600, deadline=None)
@given(_TEMPLATES)
def test_a_simple_document_is_what_the_lexer_finds(text: str) -> None:
    """The parser's one-regex pass over a document of plain macros gives, when it answers,
    the macros the lexer finds (start, end, flags, name, arguments)."""
    from tavernkit.text.macros import lexer

    simple = lexer.simple_document(text, 0, len(text))
    if simple is None:
        return
    found = lexer.scan_document(text, 0, len(text))
    assert all(r.complete and not r.is_var and not r.nested for r in found)
    assert simple == [(r.start, r.end, r.flags, r.name, r.args) for r in found]


def test_the_simple_document_pass_answers_plain_templates_only() -> None:
    from tavernkit.text.macros.lexer import simple_document

    plain = "Hi {{user}}, {{pick::a::b}} and {{/if}}."
    assert [(s, e, n) for s, e, _, n, _ in simple_document(plain, 0, len(plain)) or []] == [
        (3, 11, "user"),
        (13, 27, "pick"),
        (32, 39, "if"),
    ]
    for other in ("{{{user}}}", "{{.x}}", "{{// c}}", "{{getvar::{{user}}}}", "{{ user }}"):
        assert simple_document(other, 0, len(other)) is None, other
