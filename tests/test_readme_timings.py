"""Every timing the README and docs/ state as measured is tied to the benchmark script that
measures it (``benchmarks/<name>.py``, named in the same paragraph, list item or table row);
configured limits (timeouts, budgets, cooldowns) are not measurements and need none."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
BENCHMARKS = {path.name for path in (ROOT / "benchmarks").glob("*.py")}

#: a duration (``3.8 s``, ``1–2 ms``, ``14 minutes``) or a speed ratio (``~14x slower``)
_TIMING = re.compile(
    r"\d[\d.,]*(?:\s?[–-]\s?\d[\d.,]*)?\s?(?:ms|µs|s|seconds?|minutes?)\b"
    r"|\d[\d.]*x\s+(?:slower|faster)",
)
#: words that say a figure was measured rather than configured
_MEASURED = re.compile(
    r"\b(?:measured|figures?|p50|p99|median|took|in under|faster|slower|tokens/s|turns/s|"
    r"(?:takes|runs in) (?:about |~)?\d)",
    re.IGNORECASE,
)
_SCRIPT = re.compile(r"`(?:benchmarks/)?([A-Za-z_]\w*\.py)\b")


def _blocks(text: str) -> list[str]:
    """Paragraphs, list items and table rows (code blocks left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.splitlines()
        current: list[str] = []
        for line in lines:
            if line.startswith(("- ", "|")) and current:
                blocks.append("\n".join(current))
                current = []
            current.append(line)
        if current:
            blocks.append("\n".join(current))
    return blocks


def untied_timings(text: str) -> list[str]:
    """The blocks of ``text`` that state a measured timing without naming its benchmark."""
    out = []
    for block in _blocks(text):
        if not (_TIMING.search(block) and _MEASURED.search(block)):
            continue
        if not any(name in BENCHMARKS for name in _SCRIPT.findall(block)):
            out.append(block)
    return out


def test_every_measured_timing_names_its_benchmark() -> None:
    assert DOCS, "docs/ holds the reference pages"
    for page in (README, *DOCS):
        assert untied_timings(page.read_text("utf-8")) == [], page.name


def test_the_check_finds_an_untied_figure_and_passes_a_tied_one() -> None:
    assert untied_timings("The install took 39 s on a 2-core box.\n") != []
    assert untied_timings("Measured (`benchmarks/embed.py`): load 0.5 s.\n") == []
    assert untied_timings("A timeout of 10 s applies (configurable).\n") == []
