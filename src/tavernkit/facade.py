"""``Tavern``: the one object an application, a bot or the CLI holds.

It builds the :class:`~tavernkit.runtime.Runtime` of one data dir and one owner (store,
plugins, tools, renderer, running generations, key cooldowns, embedded models) and hands out
the services built on it: :attr:`Tavern.library`, :attr:`Tavern.chats` (one
:class:`~tavernkit.chat.ChatService`), :meth:`Tavern.context` (a
:class:`~tavernkit.context.TavernContext`) and :attr:`Tavern.profiles`. Those services get the
runtime, never the Tavern: nothing below this module imports it. Use it as an async context
manager so the database is closed::

    async with Tavern() as tk:
        await tk.library.import_file("card.png")
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from tavernkit.errors import StoreError, TavernKitError
from tavernkit.owner import DEFAULT_OWNER

# Everything else is imported where it is first needed, not here: ``from tavernkit import
# Tavern`` is the floor of every CLI command, and the engine below (every model class,
# pydantic, the store's drivers, the generation engine, the HTTP client) took 1.5 s of it.
# A Tavern made and opened imports them then (tests/test_import_cost.py).
if TYPE_CHECKING:
    import pluggy

    from tavernkit.chat.script_host import ScriptOutcome
    from tavernkit.chat.service import ChatService
    from tavernkit.context import TavernContext
    from tavernkit.formats import FormatLimits
    from tavernkit.generation.abort import ActiveGenerations
    from tavernkit.generation.keys import CooldownStore
    from tavernkit.generation.profiles import ProviderLike
    from tavernkit.library import Library
    from tavernkit.models.profile import ConnectionProfile
    from tavernkit.models.settings import Settings
    from tavernkit.plugins.formats import FormatRegistry
    from tavernkit.profile_admin import ProfileAdmin
    from tavernkit.providers.profiles import ModelProfile
    from tavernkit.regex_admin import RegexAdmin
    from tavernkit.runtime import Runtime
    from tavernkit.store.protocol import Store
    from tavernkit.stscript import Asker
    from tavernkit.text.render import ChatLunaRenderService, PromptRenderer
    from tavernkit.tools.mcp_source import McpTools
    from tavernkit.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

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
        database: str | None = None,
        limits: FormatLimits | None = None,
        database_pool: int | None = None,
    ) -> None:
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.plugins.extend import plugin_renderer, plugin_sources
        from tavernkit.plugins.formats import FormatRegistry
        from tavernkit.plugins.manager import get_plugin_manager
        from tavernkit.runtime import Runtime
        from tavernkit.store.paths import data_dir

        self.home = Path(home) if home is not None else data_dir(create=False)
        #: the most connections the PostgreSQL store opens (None: its default)
        self.database_pool = database_pool
        #: a ``postgresql://`` URL (``$TAVERNKIT_DATABASE_URL``) puts the data in PostgreSQL,
        #: shared by several processes; unset, it is ``tavernkit.db`` in ``home``
        self.database = database or os.environ.get("TAVERNKIT_DATABASE_URL") or None
        #: the caps on files the library reads (a lorebook's size among them); ``None``: the
        #: defaults (:data:`~tavernkit.formats.DEFAULT_LIMITS`)
        self.limits = limits
        self.plugins: pluggy.PluginManager = get_plugin_manager(load_entrypoints=load_plugins)
        self.formats: FormatRegistry = FormatRegistry.from_plugins(self.plugins)
        #: what the services below the facade share (store, owner, plugins, tools, renderer,
        #: running generations, key cooldowns, embedded models); the chat service and every
        #: context get this, never the Tavern
        self.runtime: Runtime = Runtime(
            owner=owner,
            plugins=self.plugins,
            prompt_renderer=plugin_renderer(self.plugins),
            provider_sources=plugin_sources(self.plugins),
        )
        # the plugins' ``register_tools`` hooks fill the registry first
        self.plugins.hook.register_tools(register=self.runtime.tools.register_function_tool)
        if self.plugins.hook.register_script_commands.get_hookimpls():
            # the built-in slash commands are imported only for a plugin that adds to them
            from tavernkit.plugins.script_commands import plugin_script_commands

            self.runtime.script_commands = plugin_script_commands(self.plugins)
        self._library: Library | None = None
        self._chats: ChatService | None = None
        #: owner -> that owner's view (see :meth:`for_owner`); None on a view itself
        self._views: dict[str, Tavern] | None = {}
        #: a view borrows its parent's store: closing the view never closes the store
        self._borrowed = False

    def for_owner(self, owner: str) -> Tavern:
        """The Tavern of ``owner`` over this Tavern's open store: its own runtime (tools,
        running generations, one chat service, its MCP servers), sharing the store, the plugins,
        the formats, the prompt renderer, the plugins' provider sources, the embedded models and
        the environment keys' cooldowns. Made once
        per owner and cached, so a server builds one per user, not one per request; the view
        stays usable while this Tavern is open and is detached when it closes. Asking for this
        Tavern's own owner returns this Tavern."""
        if owner == self.owner:
            return self
        if self._views is None:
            raise TavernKitError("for_owner is asked of the Tavern that made the view")
        if not self.runtime.is_open:
            raise TavernKitError("the Tavern is not open: use 'async with Tavern() as tk'")
        view = self._views.get(owner)
        if view is None:
            # imported on use, not with the module: the facade stays light (the note at the top)
            from tavernkit.library import Library
            from tavernkit.runtime import Runtime

            view = object.__new__(Tavern)
            view.home = self.home
            view.limits = self.limits
            view.plugins = self.plugins
            view.formats = self.formats
            view.runtime = Runtime(
                owner=owner,
                plugins=self.plugins,
                prompt_renderer=self.runtime.prompt_renderer,
                local_models=self.runtime.local_models,
                provider_sources=self.runtime.provider_sources,
                clock=self.runtime.clock,
            )
            # environment keys are the process's, whoever's turn uses them
            view.runtime.key_cooldowns = self.runtime.key_cooldowns
            view.runtime.script_commands = self.runtime.script_commands
            self.plugins.hook.register_tools(register=view.runtime.tools.register_function_tool)
            view._chats = None
            view._views = None
            view._borrowed = True
            view.runtime.attach(self.store)
            view._library = Library(self.store, self.formats, owner=owner, limits=self.limits)
            self._views[owner] = view
        return view

    async def forget_owner(self, owner: str) -> None:
        """Close and drop the cached view of ``owner`` (a deleted user's), if one was made:
        its chat memory's background work settles, its MCP servers and HTTP clients close. A
        later :meth:`for_owner` makes a fresh view."""
        view = self._views.pop(owner, None) if self._views is not None else None
        if view is not None:
            await view.close()

    async def open(self) -> Self:
        if self._borrowed and not self.runtime.is_open:
            raise TavernKitError("this owner's view was closed with the Tavern that made it")
        if not self.runtime.is_open:
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
            # imported on use, not with the module: the facade stays light (the note at the top)
            from tavernkit.library import Library

            store = await self._open_store()
            self.runtime.attach(store)
            self._library = Library(store, self.formats, owner=self.owner, limits=self.limits)
        return self

    async def _open_store(self) -> Store:
        # the store's drivers are imported on open, not with the facade (the note at the top)
        from tavernkit.store.backends import open_store
        from tavernkit.store.paths import DB_FILE_NAME
        from tavernkit.store.postgres import is_postgres_url, redact_url

        if self.database is None:
            return await open_store(self.home / DB_FILE_NAME)
        if not is_postgres_url(self.database):
            raise StoreError(
                f"not a database URL: {redact_url(self.database)!r} "
                "(expected postgresql://user@host:port/database)"
            )
        return await open_store(self.database, pool_size=self.database_pool)

    async def close(self) -> None:
        if self._chats is not None:
            await self._chats.memory.settle()  # no background sync outlives the store
        for view in (self._views or {}).values():
            await view.close()
        if self._views is not None:
            self._views.clear()
        await self.runtime.mcp.close()
        await self.runtime.http.aclose()
        store = self.runtime.detach()
        self._library = None
        if store is not None and not self._borrowed:
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
    def owner(self) -> str:
        return self.runtime.owner

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def library(self) -> Library:
        if self._library is None:
            raise TavernKitError("the Tavern is not open: use 'async with Tavern() as tk'")
        return self._library

    @property
    def tools(self) -> ToolRegistry:
        """The function tools offered to this Tavern's chats (never shared between Taverns)."""
        return self.runtime.tools

    @property
    def mcp(self) -> McpTools:
        """This owner's MCP server registrations (add, remove, enable a server or one of its
        tools); their tools are offered to chat turns with ``tools``' own."""
        return self.runtime.mcp

    @property
    def prompt_renderer(self) -> PromptRenderer:
        """The template service every prompt of this Tavern evaluates its macros through."""
        return self.runtime.prompt_renderer

    @property
    def chatluna_renderer(self) -> ChatLunaRenderService:
        """ChatLuna's prompt renderer service (``ctx.chatluna.promptRenderer``): templates in
        ChatLuna's ``{name}`` dialect, its providers, messages and presets."""
        return self.runtime.chatluna_renderer

    @property
    def generations(self) -> ActiveGenerations:
        """Generations running now, by chat (``stop_generation`` / ``streaming_processor``)."""
        return self.runtime.generations

    async def settings(self) -> Settings:
        """The owner's settings (defaults until some are stored or imported)."""
        return await self.runtime.settings()

    def local_provider(
        self, profile: ConnectionProfile, model_profile: ModelProfile
    ) -> ProviderLike:
        """The embedded model of ``profile`` (a ``LocalFactory``): made on first use and
        shared by every chat turn and task of this Tavern (see
        :class:`~tavernkit.runtime.LocalModels`)."""
        return self.runtime.local_models(profile, model_profile)

    @property
    def regex(self) -> RegexAdmin:
        """The owner's regex scripts (global list, allowed cards and presets; see
        :mod:`tavernkit.regex_admin`); what ``tavernkit regex`` edits."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.regex_admin import RegexAdmin

        return RegexAdmin(self.store, self.owner)

    @property
    def profiles(self) -> ProfileAdmin:
        """Connection profiles, their key pools and fallback chains (see
        :mod:`tavernkit.profile_admin`); what ``tavernkit profile`` edits."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.profile_admin import ProfileAdmin

        return ProfileAdmin(self.store, self.owner)

    @property
    def key_cooldowns(self) -> CooldownStore:
        """Cooldowns and use counts of keys read from environment variables, shared by every
        chat turn and task of this Tavern (see :class:`~tavernkit.runtime.Runtime`)."""
        return self.runtime.key_cooldowns

    def context(self, chat_id: str | None = None, **options: Any) -> TavernContext:
        """The per-chat view plugins and bots use (``generate_task`` and friends); see
        :class:`~tavernkit.context.TavernContext` for ``options``."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.context import TavernContext

        return TavernContext(self.runtime, chat_id, chats=self.chats, **options)

    async def run_script(
        self,
        chat_id: str,
        script: str,
        *,
        admit: Callable[[], Awaitable[None]] | None = None,
        input_text: str = "",
        asker: Asker | None = None,
    ) -> ScriptOutcome:
        """Run an STscript (SillyTavern's slash-command language) on a chat, as its owner:
        messages, variables and quick replies change in the store as the script goes;
        ``/gen`` and friends generate through :attr:`chats` (``admit`` is awaited before each
        one: the server's rate limit), ``/genraw`` through :meth:`context`; ``asker`` answers
        ``/input``, ``/popup`` and ``/buttons`` (None: they return what they return when no
        one can be asked). The outcome holds the pipe, the toasts, the input box, or the
        script's error."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.chat.script_host import run_chat_script

        context = self.context(chat_id)
        return await run_chat_script(
            self.chats,
            chat_id,
            script,
            raw=context.generate_raw,
            admit=admit,
            input_text=input_text,
            registry=self.runtime.script_commands,
            store_regex_toggle=self.regex.store_toggle,
            asker=asker,
        )

    async def run_quick_reply(
        self,
        chat_id: str,
        set_name: str,
        reply: int | str,
        *,
        admit: Callable[[], Awaitable[None]] | None = None,
        input_text: str = "",
        mode: Literal["click", "run"] = "click",
        asker: Asker | None = None,
        parent: tuple[str, int | str] | None = None,
    ) -> ScriptOutcome:
        """Click a Quick Reply button on a chat (the reply's id or label in ``set_name``), with
        ``input_text`` typed: a script runs as :meth:`run_script` does, a text is sent (or left
        in the input box when the set has ``disableSend``); ``mode="run"`` runs it as ``/run``
        and automatic executions do. ``parent`` (set name, reply id or label): the reply was
        picked from that reply's context menu (a chained link runs the parent first)."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.chat.script_host import run_chat_quick_reply

        context = self.context(chat_id)
        return await run_chat_quick_reply(
            self.chats,
            chat_id,
            set_name,
            reply,
            raw=context.generate_raw,
            admit=admit,
            input_text=input_text,
            mode=mode,
            parent=parent,
            registry=self.runtime.script_commands,
            store_regex_toggle=self.regex.store_toggle,
            asker=asker,
        )

    @property
    def chats(self) -> ChatService:
        """The chat service (send, swipe, regenerate...) of this Tavern; one per Tavern, so
        its one-turn-per-chat rule covers every caller."""
        if self._chats is None:
            # imported on use, not with the module: the facade stays light (the note at the top)
            from tavernkit.chat.service import ChatService

            self._chats = ChatService(self.runtime)
            self._chats.after_reply = self._after_reply
        return self._chats

    async def warm_up(self, profile: str = "") -> list[str]:
        """Load now what the first turn would otherwise load while it runs, on the event loop
        (where it holds up every other request too): the HTTP client's TLS context, the
        tokenizer vocabulary the model of ``profile`` (default: the selected one) counts with
        (0.3-0.7 s), and the embedded model's weights when that profile is the embedded one
        (or none is selected). ``tavernkit serve`` calls it before it listens, ``tavernkit
        chat`` while the first message is typed. Returns what it loaded; a profile that cannot
        be resolved, or a model that cannot be loaded, is logged and left to the first turn,
        which says what is wrong with it."""
        # imported on use, not with the module: asyncio alone is ~22 ms that every CLI
        # command would pay (python -X importtime), and the rest is the engine below
        import asyncio

        import anyio

        from tavernkit.chat.prepare import turn_tokenizer
        from tavernkit.providers.local_llama import LocalLlamaProvider

        loaded = ["http client"]
        self.runtime.http.client()
        # httpcore2's pool makes its events with anyio, whose asyncio backend is imported on
        # first use (~20 ms of the first request)
        anyio.Event()
        try:
            connection = await self.context().resolve_named(profile)
            tokenizer = turn_tokenizer(connection, await self.settings())
            tokenizer.count("warm up")
            loaded.append(f"tokenizer {getattr(tokenizer, 'name', type(tokenizer).__name__)}")
            if isinstance(connection.provider, LocalLlamaProvider):
                await asyncio.to_thread(connection.provider.load)
                loaded.append(f"embedded model {connection.model}")
        except TavernKitError as exc:
            log.warning("warm-up stopped: %s: %s", type(exc).__name__, exc)
        return loaded

    async def _after_reply(self, chat_id: str, built_with: Settings | None = None) -> None:
        """The rolling summary after a reply (``Settings.memory.summary``, as the turn was
        built with them: read again only when it was not); a failure is logged by class,
        never raised into the finished turn."""
        # imported on use, not with the module: the facade stays light (see the note at the top)
        from tavernkit.assist.summary import summarize

        settings = (built_with or await self.runtime.settings()).memory.summary
        if not settings.active:
            return
        try:
            await summarize(self.context(chat_id), settings=settings)
        except TavernKitError as exc:
            log.warning("summary of chat %s failed: %s", chat_id, type(exc).__name__)
