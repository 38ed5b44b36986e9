"""Memory in a chat turn: the owner's ``Settings.memory`` applied before the world-info scan
(``memory.apply_memory``), with the embedder the settings name and the store's vectors.

After a stored reply, :meth:`ChatMemory.after_reply` embeds the new messages in the
background, as SillyTavern syncs them after the reply: the next turn then finds them indexed
and waits only for its query (it first awaits a sync still running for its chat, so a turn
never races one; :meth:`ChatMemory.settle` awaits them all, the Tavern does before closing).

``vectors.embedder``: ``"local"`` is the offline MiniLM embedder (extra ``embed``);
``"profile:<name>"`` that connection profile's OpenAI-compatible ``/embeddings`` endpoint
(its base URL and key; the model is ``vectors.embedding_model``, else the profile's). A
chat's collection is ``chat:<chat id>``, a lorebook's ``world_<cyrb53(name)>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from tavernkit.chat.prepare import resolve_profile
from tavernkit.errors import MemoryConfigError, NotFound, TavernKitError
from tavernkit.memory.chat_memory import sync_chat
from tavernkit.memory.collections import VectorRows
from tavernkit.memory.embedding import EndpointEmbedder, TextEmbedder
from tavernkit.memory.turn import MemoryStep, apply_memory
from tavernkit.models.memory import VectorSettings
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.state import ChatState
from tavernkit.prompt.from_chat_state import prompt_state_from_chat_state
from tavernkit.prompt.macros import macro_substitute
from tavernkit.prompt.state import PromptState
from tavernkit.runtime import PooledClient, Runtime
from tavernkit.store.chat_state import load_chat_state

__all__ = ["ChatMemory", "chat_collection"]

log = logging.getLogger(__name__)


def chat_collection(chat_id: str) -> str:
    return f"chat:{chat_id}"


class ChatMemory:
    """The :class:`~tavernkit.memory.turn.TurnMemory` of a chat service."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        client: Any = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self._client = client
        self.environ = environ
        self._endpoints: dict[tuple[str, str, str, int], EndpointEmbedder] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        #: chats whose last turn recalled from its vectors (only those are indexed after)
        self._recalling: set[str] = set()

    #: the HTTP client an endpoint embedder posts on: the one given, else the runtime's pool
    #: (so the owner's egress policy applies to embeddings as to every other request)
    client = PooledClient()

    def after_reply(self, chat_id: str, *, owner: str) -> None:
        """Embed the chat's new messages in the background (see the module docstring);
        nothing for a chat whose turn did not use chat memory."""
        if chat_id not in self._recalling:
            return
        self._recalling.discard(chat_id)
        if chat_id in self._pending and not self._pending[chat_id].done():
            return  # the running sync reads the chat when it starts its next step anyway
        self._pending[chat_id] = asyncio.get_running_loop().create_task(self._index(chat_id, owner))

    async def _index(self, chat_id: str, owner: str) -> None:
        try:
            state = await load_chat_state(self.runtime.store, owner=owner, chat_id=chat_id)
            vectors = state.settings.memory.vectors
            if not vectors.enabled_chats:
                return
            embedder = await self.embedder(vectors, owner=owner)
            collections = self.runtime.memory.collections(self._rows(), owner, embedder)
            pstate = prompt_state_from_chat_state(state)
            substitute = macro_substitute(pstate, compat=state.compat)
            await sync_chat(
                collections, chat_collection(chat_id), state.messages, vectors, substitute
            )
        except TavernKitError as exc:  # the next turn syncs again and reports it
            log.warning("indexing chat %s failed: %s", chat_id, type(exc).__name__)

    async def settle(self, chat_id: str | None = None) -> None:
        """Await the background syncs (of one chat, or all)."""
        tasks = [t for c, t in self._pending.items() if chat_id is None or c == chat_id]
        for task in tasks:
            await asyncio.shield(task)
        for c in [c for c, t in self._pending.items() if t.done()]:
            del self._pending[c]

    def _rows(self) -> VectorRows | None:
        """The store's vector rows (SQLite's and PostgreSQL's); a store without them keeps
        the vectors in this process only (re-embedded after a restart)."""
        store = self.runtime.store
        return store if isinstance(store, VectorRows) else None

    async def embedder(self, settings: VectorSettings, *, owner: str) -> TextEmbedder:
        """The embedder ``settings`` name (see the module docstring)."""
        spec = settings.embedder.strip()
        if spec in ("", "local"):
            return self.runtime.memory.local()
        if not spec.startswith("profile:"):
            raise MemoryConfigError(
                f"unknown embedder {spec!r}: use 'local' or 'profile:<connection profile>'"
            )
        name = spec.removeprefix("profile:")
        store = self.runtime.store
        try:
            profile = await store.get("connection_profile", name, owner=owner)
        except NotFound:
            raise MemoryConfigError(f"the embedder names no connection profile {name!r}") from None
        if not isinstance(profile, ConnectionProfile) or not profile.base_url:
            raise MemoryConfigError(f"connection profile {name!r} has no base URL for embeddings")
        model = settings.embedding_model or profile.model or ""
        if not model:
            raise MemoryConfigError(f"no embedding model: set vectors.embedding_model ({name!r})")
        client = self.client
        key = (owner, name, model, id(client))  # a new pool client (a new policy): a new one
        found = self._endpoints.get(key)
        if found is None:
            connection = await resolve_profile(
                store, profile, owner=owner, client=client, environ=self.environ
            )
            keys = getattr(connection.provider, "keys", None)
            secret = keys() if callable(keys) else keys
            found = self._endpoints[key] = EndpointEmbedder(
                profile.base_url,
                model,
                key=secret if isinstance(secret, str) else None,
                client=client,
            )
        return found

    async def __call__(
        self,
        state: ChatState,
        prompt_state: PromptState,
        substitute: Callable[[str], str],
        *,
        owner: str,
        kind: str,
        dry_run: bool,
        compat: str,
    ) -> MemoryStep:
        settings = state.settings.memory
        vectors = settings.vectors
        collections = None
        if vectors.active and kind != "quiet" and not dry_run:
            if state.chat_id is not None:
                await self.settle(state.chat_id)
                if vectors.enabled_chats:
                    self._recalling.add(state.chat_id)
            embedder = await self.embedder(vectors, owner=owner)
            collections = self.runtime.memory.collections(self._rows(), owner, embedder)
        return await apply_memory(
            prompt_state,
            settings,
            books=[(b.name, b.book, b.scope) for b in state.books],
            collections=collections,
            chat_collection=chat_collection(state.chat_id) if state.chat_id else None,
            substitute=substitute,
            kind=kind,
            dry_run=dry_run,
            compat=compat == "st-1.18",
        )
