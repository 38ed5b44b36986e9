"""Testing one lorebook: every entry, whether it fires for a chat's next turn or for a given
text, and why (the scan's own record, ``scan(explain=True)``). A dry run: no timed effect
advances and nothing is stored. ``tavernkit lore test`` and the web UI's "test this text" both
read these rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavernkit.errors import TavernKitError
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.settings import Settings
from tavernkit.models.state import ScopedBook
from tavernkit.prompt.pipeline import PromptTarget, begin
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.protocol import Store
from tavernkit.text.tokens import ByteEstimateTokenizer
from tavernkit.worldinfo import Book, WorldInfoResult, scan
from tavernkit.worldinfo.replay import name_substitute

__all__ = [
    "lore_book",
    "lore_rows",
    "position_label",
    "scan_lore_chat",
    "scan_lore_text",
]

_POSITIONS = {
    0: "before char",
    1: "after char",
    2: "AN top",
    3: "AN bottom",
    5: "before examples",
    6: "after examples",
}
_ROLES = {0: "system", 1: "user", 2: "assistant"}


def position_label(position: Any, depth: Any, role: Any, outlet: Any = None) -> str:
    """SillyTavern's position names (``@D4 system`` for an in-chat depth entry)."""
    if position == 4 and not isinstance(position, bool):
        d = 4 if depth is None else depth
        return f"@D{d} {_ROLES.get(0 if role is None else role, str(role))}"
    if position == 7 and not isinstance(position, bool):
        return f"outlet {outlet}" if outlet else "outlet"
    if isinstance(position, int) and not isinstance(position, bool) and position in _POSITIONS:
        return _POSITIONS[position]
    return str(position)


def lore_rows(result: WorldInfoResult, count: Callable[[str], int]) -> list[dict[str, Any]]:
    """One row per scanned entry (the scan's order): the explanation plus the position label
    and the tokens of the content it emits (fired) or would emit (before macros)."""
    if result.explain is None:
        raise TavernKitError("the scan was run without explain=True")
    emitted = {a.key: a for a in result.activated}
    rows: list[dict[str, Any]] = []
    for reason in result.explain:
        row = reason.to_json()
        fired = emitted.get(reason.key)
        content = fired.content if fired is not None else reason.content
        outlet = fired.outlet_name if fired is not None else None
        row["why"] = reason.detail
        row["position_label"] = position_label(reason.position, reason.depth, reason.role, outlet)
        row["tokens"] = count(content) if content else 0
        row["content"] = content
        rows.append(row)
    return rows


async def lore_book(store: Store, owner: str, book: str) -> tuple[str, Lorebook]:
    """The lorebook ``book`` (id or name) and its stored name."""
    lorebook = await store.get("lorebook", book, owner=owner)
    if not isinstance(lorebook, Lorebook):
        raise TavernKitError(f"{book!r} is not a lorebook")
    record = await store.get_record("lorebook", book, owner=owner)
    return record.info.name, lorebook


async def scan_lore_chat(
    store: Store,
    owner: str,
    name: str,
    lorebook: Lorebook,
    chat: str,
    kind: str,
    rng: Callable[[], float],
) -> WorldInfoResult:
    """The next turn's own scan of ``chat`` with only ``lorebook``, explained (a dry run)."""
    state = await load_chat_state(store, owner=owner, chat_id=chat)
    state = state.model_copy(
        update={"books": [ScopedBook(name=name, scope="global", book=lorebook)]}
    )
    # The turn's own scan (the prompt pipeline's), asked to explain itself.
    session = begin(state, PromptTarget(tokenizer=ByteEstimateTokenizer()))
    result = session.scan(kind, rng=rng, dry_run=True, explain=True)
    return result if result is not None else WorldInfoResult()


def scan_lore_text(
    settings: Settings,
    name: str,
    lorebook: Lorebook,
    text: str,
    kind: str,
    rng: Callable[[], float],
) -> WorldInfoResult:
    """Scan ``text`` as the one message of a chat with only ``lorebook``, under ``settings``'
    scan options, explained (a dry run)."""
    prompt = settings.prompt
    return scan(
        [Book(name, lorebook)],
        [text],
        max_context=prompt.max_context - prompt.amount_gen,
        settings=settings.world_info,
        trigger=kind,
        substitute=name_substitute("", settings.selections.user_name),
        count_tokens=ByteEstimateTokenizer().count,
        rng=rng,
        dry_run=True,
        compat=settings.compat,
        explain=True,
    )
