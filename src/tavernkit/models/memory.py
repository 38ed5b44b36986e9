"""Memory settings: SillyTavern's Vector Storage (``extension_settings.vectors``) and
Summarize (``extension_settings.memory``) extensions, with their 1.18 code defaults.

Both read SillyTavern's own keys (``VectorSettings.model_validate(extension_settings.vectors)``
keeps what it knows and ignores the rest, as the extension copies stored values over its
defaults); our attribute names are snake_case, Summarize's camelCase keys are the aliases.
Embeddings come from ``embedder``: ``"local"`` (the offline MiniLM embedder of
``tavernkit.embed``) or ``"profile:<name>"`` (that connection profile's OpenAI-compatible
``/embeddings`` endpoint, with ``embedding_model``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from tavernkit.models.base import ValueModel

__all__ = ["MemorySettings", "SummarySettings", "VectorSettings"]

DEFAULT_SUMMARY_PROMPT = (
    "Ignore previous instructions. Summarize the most important facts and events in the story "
    "so far. If a summary already exists in your memory, use that as a base and expand with new "
    "facts. Limit the summary to {{words}} words or less. Your response should include nothing "
    "but the summary."
)


def _int_from_text(value: Any) -> Any:
    # The UI stores some numbers as strings ("2", the radio buttons' ``position``);
    # SillyTavern converts them where it uses them.
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


#: an int that SillyTavern may have stored as its decimal string
UiInt = Annotated[int, BeforeValidator(_int_from_text)]


class _Lenient(ValueModel):
    # SillyTavern's settings objects carry UI bookkeeping (min/max/step keys): ignore them.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, validate_by_name=True)


class VectorSettings(_Lenient):
    """``extension_settings.vectors``: chat vectors and vectorized world info (reference §2.1).

    ``position``: 2 before the main prompt / story string, 0 after it, 1 in chat at ``depth``
    (always as system). ``protect``: the last N messages are never moved; ``insert``: how many
    messages the chat query returns; ``query``: how many recent messages make the query text;
    ``score_threshold`` applies to world info only in compat ``st-1.18`` (SillyTavern's chat
    path ignores it) and to both otherwise; ``max_entries`` caps vectorized world info.
    """

    enabled_chats: bool = False
    enabled_world_info: bool = False
    enabled_for_all: bool = False
    template: str = "Past events:\n{{text}}"
    position: UiInt = 0
    depth: UiInt = 2
    protect: UiInt = 5
    insert: UiInt = 3
    query: UiInt = 2
    message_chunk_size: int = 400
    force_chunk_delimiter: str = ""
    score_threshold: float = 0.25
    max_entries: UiInt = 5
    include_wi: bool = False
    keep_hidden: bool = False
    #: ours: ``"local"`` or ``"profile:<connection profile>"``
    embedder: str = "local"
    #: ours: the model asked of a profile's ``/embeddings`` endpoint
    embedding_model: str = ""

    @property
    def active(self) -> bool:
        return self.enabled_chats or self.enabled_world_info


class SummarySettings(_Lenient):
    """``extension_settings.memory``: the rolling summary (reference §3.1).

    ``source`` must be ``"main"`` for tavernkit to summarise (SillyTavern's default
    ``"extras"`` is a server tavernkit does not have: nothing is summarised, as in SillyTavern
    until the user picks the main API). ``prompt_interval`` messages (0 = never) or, with a
    non-zero interval, ``prompt_force_words`` words since the last summary start a new one;
    ``prompt_builder`` 0 is Classic (a quiet generation with the whole character prompt), 1/2
    Raw (the summary prompt plus the new messages only). ``position`` -1 none, 0 after the
    main prompt, 1 in chat at ``depth`` as ``role``, 2 before the main prompt.
    """

    source: str = "extras"
    memory_frozen: bool = Field(False, alias="memoryFrozen")
    skip_wian: bool = Field(False, alias="SkipWIAN")
    prompt: str = DEFAULT_SUMMARY_PROMPT
    prompt_words: int = Field(200, alias="promptWords")
    override_response_length: int = Field(0, alias="overrideResponseLength")
    max_messages_per_request: int = Field(0, alias="maxMessagesPerRequest")
    prompt_interval: int = Field(10, alias="promptInterval")
    prompt_force_words: int = Field(0, alias="promptForceWords")
    prompt_builder: UiInt = 0
    template: str = "[Summary: {{summary}}]"
    position: UiInt = 0
    depth: UiInt = 2
    role: UiInt = 0
    scan: bool = False

    @property
    def active(self) -> bool:
        return self.source == "main" and not self.memory_frozen


class MemorySettings(ValueModel):
    """Both memory extensions of one owner (``Settings.memory``); off by default."""

    vectors: VectorSettings = Field(default_factory=VectorSettings)
    summary: SummarySettings = Field(default_factory=SummarySettings)
