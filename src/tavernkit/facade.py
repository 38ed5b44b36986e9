"""``Tavern``: the one object an application, a bot or the CLI holds.

It owns the store, the plugin manager and the format registry of one data dir and one owner,
and hands out the services built on them (:class:`~tavernkit.library.Library` today; the chat
service, ``context()`` and ``prompt_renderer`` as their issues land). Use it as an async
context manager so the database is closed::

    async with Tavern() as tk:
        await tk.library.import_file("card.png")
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import pluggy

from tavernkit.errors import StoreError, TavernKitError
from tavernkit.generation.abort import ActiveGenerations
from tavernkit.library import Library
from tavernkit.models._base import DEFAULT_OWNER
from tavernkit.models.settings import Settings
from tavernkit.plugins.formats import FormatRegistry
from tavernkit.plugins.manager import get_plugin_manager
from tavernkit.store.paths import DB_FILE_NAME, data_dir
from tavernkit.store.sqlite import SqliteStore, open_store
from tavernkit.text.render import PromptRenderer
from tavernkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from tavernkit.chat.service import ChatService
    from tavernkit.context import TavernContext
    from tavernkit.generation.keys import InMemoryCooldownStore
    from tavernkit.generation.profiles import ProviderLike
    from tavernkit.models.profile import ConnectionProfile
    from tavernkit.profile_admin import ProfileAdmin
    from tavernkit.providers.profiles import ModelProfile

__all__ = ["Tavern"]


class Tavern:
    """The facade over one data dir (``home``; default ``$TAVERNKIT_HOME`` or the platform's
    user data dir) for one ``owner``."""

    def __init__(
        self,
        home: Path | str | None = None,
        *,
        owner: str = DEFAULT_OWNER,
        load_plugins: bool = True,
    ) -> None:
        self.home = Path(home) if home is not None else data_dir(create=False)
        self.owner = owner
        self.plugins: pluggy.PluginManager = get_plugin_manager(load_entrypoints=load_plugins)
        self.formats = FormatRegistry.from_plugins(self.plugins)
        self._store: SqliteStore | None = None
        self._library: Library | None = None
        #: function tools offered to this Tavern's chats (never shared between Taverns); the
        #: plugins' ``register_tools`` hooks fill it first
        self.tools = ToolRegistry()
        self.plugins.hook.register_tools(register=self.tools.register_function_tool)
        #: The template service every prompt of this Tavern evaluates its macros through.
        self.prompt_renderer = PromptRenderer()
        #: generations running now, by chat (``stop_generation`` / ``streaming_processor``)
        self.generations = ActiveGenerations()
        self._chats: ChatService | None = None
        #: the embedded models this Tavern has made, by model name (see :meth:`local_provider`)
        self._local: dict[str, ProviderLike] = {}
        self._key_cooldowns: InMemoryCooldownStore | None = None

    async def open(self) -> Self:
        if self._store is None:
            try:
                self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
            except FileExistsError:
                raise StoreError(
                    f"the data folder {self.home} is a file, not a folder "
                    "(check TAVERNKIT_HOME or --home)"
                ) from None
            except OSError as exc:
                raise StoreError(
                    f"cannot create the data folder {self.home}: {exc.strerror or exc}"
                ) from None
            self._store = await open_store(self.home / DB_FILE_NAME)
            self._library = Library(self._store, self.formats, owner=self.owner)
        return self

    async def close(self) -> None:
        if self._store is not None:
            store, self._store, self._library = self._store, None, None
            await store.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def store(self) -> SqliteStore:
        if self._store is None:
            raise TavernKitError("the Tavern is not open: use 'async with Tavern() as tk'")
        return self._store

    @property
    def library(self) -> Library:
        if self._library is None:
            raise TavernKitError("the Tavern is not open: use 'async with Tavern() as tk'")
        return self._library

    async def settings(self) -> Settings:
        """The owner's settings (defaults until some are stored or imported)."""
        stored = await self.store.get_settings(owner=self.owner)
        return stored if isinstance(stored, Settings) else Settings()

    def local_provider(
        self, profile: ConnectionProfile, model_profile: ModelProfile
    ) -> ProviderLike:
        """The embedded model of ``profile`` (a ``LocalFactory``): made on first use and
        shared by every chat turn and task of this Tavern, so the model file (hundreds of MB)
        is loaded once per process, not once per turn. The model profile of each call is
        passed with the call, so sharing loses nothing."""
        name = profile.model or "smollm2-135m-instruct"
        provider = self._local.get(name)
        if provider is None:
            from tavernkit.generation.profiles import local_provider

            provider = self._local[name] = local_provider(profile, model_profile)
        return provider

    @property
    def profiles(self) -> ProfileAdmin:
        """Connection profiles, their key pools and fallback chains (see
        :mod:`tavernkit.profile_admin`); what ``tavernkit profile`` edits."""
        from tavernkit.profile_admin import ProfileAdmin

        return ProfileAdmin(self.store, self.owner)

    @property
    def key_cooldowns(self) -> InMemoryCooldownStore:
        """Cooldowns and use counts of keys read from environment variables, shared by every
        chat turn and task of this Tavern (a stored key's live in the store, across
        processes; an environment key has no row there, so it rests here, for the process)."""
        if self._key_cooldowns is None:
            from tavernkit.generation.keys import InMemoryCooldownStore

            self._key_cooldowns = InMemoryCooldownStore()
        return self._key_cooldowns

    def context(self, chat_id: str | None = None, **options: Any) -> TavernContext:
        """The per-chat view plugins and bots use (``generate_task`` and friends); see
        :class:`~tavernkit.context.TavernContext` for ``options``."""
        from tavernkit.context import TavernContext

        return TavernContext(self, chat_id, **options)

    @property
    def chats(self) -> ChatService:
        """The chat service (send, swipe, regenerate...) of this Tavern; one per Tavern, so
        its one-turn-per-chat rule covers every caller."""
        if self._chats is None:
            from tavernkit.chat.service import ChatService

            self._chats = ChatService(self)
        return self._chats
