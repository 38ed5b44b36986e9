"""The CLI's messages in English, 简体中文 or 繁體中文: chosen from LC_ALL / LC_MESSAGES / LANG
(POSIX order) or ``--lang``; its catalogues (``cli/i18n/*.json``) have exactly the English keys
the code passes to ``say()``, with the same placeholders."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from tavernkit.cli import language
from tavernkit.cli.failures import Where, failure_line
from tavernkit.cli.language import language_of, say, set_language
from tavernkit.generation.result import TurnError

CLI = Path(str(resources.files("tavernkit.cli")))


@pytest.fixture(autouse=True)
def _locale_of_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    yield
    set_language(None)


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("zh_CN.UTF-8", "zh-Hans"),
        ("zh_SG", "zh-Hans"),
        ("zh", "zh-Hans"),
        ("zh-Hans", "zh-Hans"),
        ("zh_TW.UTF-8", "zh-Hant"),
        ("zh_HK.Big5", "zh-Hant"),
        ("zh_MO", "zh-Hant"),
        ("zh-Hant-TW", "zh-Hant"),
        ("en_US.UTF-8", "en"),
        ("C.UTF-8", None),
        ("fr_FR", None),
    ],
)
def test_a_locale_names_a_language(locale: str, expected: str | None) -> None:
    assert language_of(locale) == expected


def test_the_first_locale_variable_set_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "zh_TW.UTF-8")
    assert say("error:") == "錯誤："
    monkeypatch.setenv("LC_MESSAGES", "zh_CN.UTF-8")
    assert say("error:") == "错误："
    monkeypatch.setenv("LC_ALL", "C")
    assert say("error:") == "error:"
    set_language("zh-Hant")  # --lang wins over the locale
    assert say("now in chat {name}", name="Wren") == "現在位於聊天 Wren"


def test_a_generation_failure_reads_in_the_language(monkeypatch: pytest.MonkeyPatch) -> None:
    error = TurnError("network", "network")
    where = Where(profile="p", source="openai", base_url="http://127.0.0.1:9/v1")
    english = failure_line(error, where)
    assert english.startswith("cannot connect to 127.0.0.1:9 (profile 'p', openai)")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    line = failure_line(error, where)
    assert (
        line
        == "无法连接 127.0.0.1:9 (配置 'p', openai)：服务器是否在运行，URL 是否正确？ [network]"
    )


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from tavernkit.cli import main; "
        "sys.argv = ['tavernkit', *sys.argv[1:]]; main()"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **env, "COLUMNS": "200"},
    )


def test_the_cli_error_line_follows_lang_and_the_lang_option(tmp_path: Path) -> None:
    args = ("chat", "--chat", "x", "--new", "--home", str(tmp_path))
    hans = _run(*args, env={"LANG": "zh_CN.UTF-8"})
    assert hans.returncode == 2
    assert hans.stderr.strip() == "错误： --chat 和 --new 不能同时使用"
    hant = _run("--lang", "zh-Hant", *args, env={"LANG": "en_US.UTF-8"})
    assert hant.stderr.strip() == "錯誤： --chat 和 --new 不能同時使用"
    english = _run(*args, env={"LANG": "C.UTF-8"})
    assert english.stderr.strip() == "error: --chat and --new cannot be used together"
    wrong = _run("--lang", "fr", *args, env={})
    assert wrong.returncode == 2 and "--lang" in wrong.stderr


def _say_keys() -> set[str]:
    keys: set[str] = set()
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            if call and node.func.id == "say" and node.args:  # type: ignore[attr-defined]
                first = node.args[0]  # type: ignore[attr-defined]
                assert isinstance(first, ast.Constant), f"{path.name}: say() of a non-literal"
                keys.add(first.value)
    return keys


def _catalogue(name: str) -> dict[str, str]:
    loaded: dict[str, str] = json.loads((CLI / "i18n" / f"{name}.json").read_text("utf-8"))
    return loaded


def test_the_cli_catalogues_hold_exactly_the_texts_the_code_says() -> None:
    english = _catalogue("en")
    assert set(english) == _say_keys()
    assert all(key == text for key, text in english.items())
    for name in language.LANGUAGES[1:]:
        translated = _catalogue(name)
        assert set(translated) == set(english), name
        for key, text in translated.items():
            assert sorted(re.findall(r"\{\w+\}", text)) == sorted(re.findall(r"\{\w+\}", key))
            assert text != key, f"{name}: {key!r} is not translated"
