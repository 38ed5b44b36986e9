"""Response review (brief 003) on chat turns: which setting holds, and the reviewer's evidence.

The chat's own setting (``chat_metadata.tavernkit_review``) wins over its profile's
(``ConnectionProfile.review``); neither set means no review. The evidence is the turn's own:

- **persona**: the character's description and personality (what the reply must voice; a
  card without either makes review *unavailable*, and the reply is delivered unreviewed);
- **trigger**: the last user message of the prompt (the last message when none is);
- **reply target**: the user's name;
- **recent context**: the prompt's other non-system messages, the newest kept first when the
  packet is full (the packet bounds itself);
- **tools**: the catalogue the turn offers.

Proposed tool calls pass ``ChatService.review_tool_checkpoint`` (when given) before they run:
a rejected call does not run, the model is told, and the rejection lasts for the turn.
Impersonation and quiet turns are never reviewed (the turn runner's rule).
"""

from __future__ import annotations

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.chat.prepare import PreparedTurn
from tavernkit.errors import FormatError
from tavernkit.generation.plan import PlanEntry
from tavernkit.generation.review import (
    ReviewConfig,
    ReviewEvidence,
    RuleChecker,
    ToolCheckpoint,
)
from tavernkit.models.profile import ReviewSettings
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest
from tavernkit.store.protocol import Store

__all__ = [
    "chat_review",
    "check_reviewer",
    "parse_review",
    "review_config",
    "review_settings",
    "set_chat_review",
]

#: how many earlier prompt messages the reviewer may read (the packet trims further by size)
RECENT_MESSAGES = 12


def review_settings(prepared: PreparedTurn) -> ReviewSettings | None:
    """The review setting of this turn: the chat's, else its profile's; ``None`` when off."""
    chat = prepared.state.chat
    own = chat.metadata.review if chat is not None else None
    chosen = own if own is not None else prepared.connection.profile.review
    return chosen if chosen is not None and chosen.enabled else None


def _persona(prepared: PreparedTurn) -> str | None:
    character = prepared.state.character
    if character is None:
        return None
    parts = [p.strip() for p in (character.description, character.personality) if p.strip()]
    return "\n".join(parts) or None


def review_config(
    prepared: PreparedTurn,
    request: PromptRequest,
    reviewer: PlanEntry | None,
    *,
    tool_checkpoint: ToolCheckpoint | None = None,
    rule_checker: RuleChecker | None = None,
) -> ReviewConfig | None:
    """The turn's review settings with its evidence; ``reviewer`` is the pinned reviewer's
    plan entry (``None``: inherited); ``tool_checkpoint`` approves or rejects proposed tool
    calls before they run; ``rule_checker`` (the owner's prose linter) reports to the reviewer.
    ``None`` for a text-completion request (the reviewer call is a chat request)."""
    if not isinstance(request, ChatPrompt):
        return None
    talk = [m for m in request.messages if m.role != "system"]
    users = [n for n, m in enumerate(talk) if m.role == "user"]
    at = users[-1] if users else len(talk) - 1
    trigger: ChatMessage | None = talk[at] if talk else None
    history = tuple(talk[:at][-RECENT_MESSAGES:]) if talk else ()
    evidence = ReviewEvidence(
        persona=_persona(prepared),
        trigger=trigger,
        reply_target=prepared.state.user_name,
        history=history,
        tools=request.tools,
    )
    return ReviewConfig(
        enabled=True,
        evidence=evidence,
        reviewer=reviewer if reviewer is not None else "inherited",
        tool_checkpoint=tool_checkpoint,
        rule_checker=rule_checker,
    )


def parse_review(value: str) -> ReviewSettings:
    """A review setting from its command-line spelling: ``inherited`` (the author's own model
    reviews), ``off``, or ``PROFILE`` / ``PROFILE:MODEL`` (a pinned reviewer)."""
    spec = value.strip()
    if spec == "inherited":
        return ReviewSettings()
    if spec == "off":
        return ReviewSettings(enabled=False)
    profile, sep, model = spec.partition(":")
    if not profile.strip() or (sep and not model.strip()):
        raise FormatError(
            f"a review setting is inherited, off, PROFILE or PROFILE:MODEL, not {value!r}",
            source="<review>",
            field="review",
        )
    return ReviewSettings(reviewer_profile=profile.strip(), reviewer_model=model.strip() or None)


async def check_reviewer(store: Store, settings: ReviewSettings | None, *, owner: str) -> None:
    """A pinned reviewer must name a stored profile when it is set (:class:`NotFound` names
    it); one deleted later only makes review unavailable on the turns after."""
    if settings is not None and settings.reviewer_profile:
        await store.get("connection_profile", settings.reviewer_profile, owner=owner)


async def chat_review(store: Store, chat_id: str, *, owner: str) -> ReviewSettings | None:
    """The chat's own review setting (``None``: the profile's holds)."""
    return (await chat_metadata(store, chat_id, owner=owner))[1].review


async def set_chat_review(
    store: Store, chat_id: str, settings: ReviewSettings | None, *, owner: str
) -> None:
    """Set the chat's own review setting (``None``: clear it, the profile's holds). A pinned
    reviewer is checked first: a missing profile raises and nothing is written."""
    await check_reviewer(store, settings, owner=owner)
    chat_id, metadata = await chat_metadata(store, chat_id, owner=owner)
    metadata.review = settings
    await store.update_chat_metadata(chat_id, metadata.to_wire(), owner=owner)
