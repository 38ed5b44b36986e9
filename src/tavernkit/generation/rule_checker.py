"""The response review's rule checker on the owner's ``prose_linter`` MCP registration.

:class:`McpRuleChecker` is the :class:`~tavernkit.generation.review.RuleChecker` a chat turn's
review uses. It looks the registration up on every check, so a registration disabled or
removed during a turn is no checker from then on: ``check`` answers ``None`` (no report, no
detailed review, nothing logged). With one, it calls the registration's checker tool (the only
required argument, a string, is the candidate) and returns its output — the tool's text, or
its structured content as JSON — cut to 32 KB. The report goes to the reviewer's packet only;
nothing here logs it. A failure raises, and the review proceeds without a report.
"""

from __future__ import annotations

from typing import Protocol

from tavernkit.generation.review import LINTER_LIMIT
from tavernkit.tools.mcp_source import McpLinter

__all__ = ["LinterSource", "McpRuleChecker"]


class LinterSource(Protocol):
    """What the checker needs of ``Runtime.mcp``."""

    async def linter(self) -> McpLinter | None: ...


class McpRuleChecker:
    """The owner's prose linter, asked once per review (see the module docstring)."""

    def __init__(self, source: LinterSource) -> None:
        self._source = source

    async def check(self, text: str) -> str | None:
        linter = await self._source.linter()
        if linter is None:
            return None
        report = await linter.check(text)
        return report.encode()[:LINTER_LIMIT].decode("utf-8", "ignore")
