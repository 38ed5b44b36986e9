"""A tavernkit error in the CLI's language: worded from the error's code and parameters (what
the server's answers carry too) in 简体中文 and 繁體中文 — a broken file by its line and column,
a record that is not there by kind and name, a name that is taken — and in English the error's
own message, as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tavernkit.cli.error_text import error_text
from tavernkit.cli.language import set_language
from tavernkit.errors import ChatBusy, FormatError, NameTaken, NotFound


@pytest.fixture(autouse=True)
def _english_after() -> object:
    yield None
    set_language(None)


def _run(home: Path, *args: str, lang: str) -> subprocess.CompletedProcess[str]:
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
        env={**clean, "LANG": lang, "TAVERNKIT_HOME": str(home), "COLUMNS": "200"},
    )


def test_errors_are_worded_from_their_code_and_params() -> None:
    set_language("zh-Hans")
    assert error_text(NotFound("no connection profile named 'cloud'")) == "找不到连接配置 'cloud'"
    taken = NameTaken("a lorebook named 'Coast' exists", kind="lorebook", name="Coast")
    assert error_text(taken) == "已有名为 'Coast' 的世界书，且内容不同"
    assert error_text(ChatBusy("c1")) == "聊天仍在生成回复；请等待或先停止它"
    set_language("zh-Hant")
    assert error_text(NotFound("no chat 'x'")) == "找不到聊天 'x'"
    # a refusal the catalogue has no words for keeps its own (English) message
    assert error_text(FormatError("must not be empty", field="name")) == (
        "field 'name': must not be empty"
    )
    set_language("en")
    assert error_text(NotFound("no chat 'x'")) == "no chat 'x'"


def test_a_broken_file_is_named_by_line_and_column_in_the_locales_language(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "wren.json"
    broken.write_bytes(b'{"spec": "chara_card_v2",\n "data": {"name": "Wren",}}')
    hans = _run(tmp_path / "home", "import", str(broken), lang="zh_CN.UTF-8")
    assert hans.returncode != 0
    assert "wren.json 无效：第 2 行，第 26 列" in hans.stderr, hans.stderr
    english = _run(tmp_path / "home", "import", str(broken), lang="C.UTF-8")
    assert "line 2" in english.stderr and "column 26" in english.stderr, english.stderr


def test_a_record_that_is_not_there_is_named_in_the_locales_language(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    hant = _run(
        tmp_path / "home",
        "export",
        "Nobody",
        "--format",
        "json",
        "-o",
        str(out),
        lang="zh_TW.UTF-8",
    )
    assert hant.returncode != 0
    assert "找不到" in hant.stderr and "Nobody" in hant.stderr, hant.stderr
    assert "no " not in hant.stderr.lower()
