"""Connection profiles, their key pools and fallback chains, edited without touching the store.

``Tavern.profiles`` is a :class:`ProfileAdmin`; ``tavernkit profile ...`` is a thin layer over it::

    async with Tavern() as tk:
        await tk.profiles.add(
            "gpt", source="openai", model="gpt-4o",
            keys=["sk-first...", "env:OPENAI_KEY_2"],   # a pool of two keys
            timeouts=ProfileTimeouts(first_byte=180),
        )
        await tk.profiles.add_fallback("gpt", "claude", model="claude-sonnet-4")
        for summary in await tk.profiles.summaries():
            print(summary.name, summary.pool_size, summary.fallbacks)

Keys: a key given as ``env:NAME`` is a reference to that environment variable, read at each
request (never stored); any other value is a secret, stored through the store's key table
(sealed with the secret key: :mod:`tavernkit.store.secret_key`). The profile holds only the
references. Nothing here returns a secret: a summary shows a key's label and fingerprint, or
``$NAME`` for an environment key.

Fallbacks: a profile's chain is the stored :class:`~tavernkit.models.profile.FallbackChain` its
``fallback_chain`` names (one named after the profile is made on the first ``add_fallback``).
An entry is ``(profile, model)``: the same profile with two models is two entries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from pydantic import ValidationError

from tavernkit.errors import Conflict, FormatError, NotFound
from tavernkit.models.profile import (
    ApiFamily,
    ConnectionProfile,
    CredentialRef,
    FallbackChain,
    FallbackEntry,
    ProfileTimeouts,
    ReviewSettings,
)
from tavernkit.models.settings import Settings
from tavernkit.store.protocol import Store

__all__ = ["ProfileAdmin", "ProfileFields", "ProfileSummary", "parse_fallback", "parse_key"]

PROFILE = "connection_profile"
CHAIN = "fallback_chain"
ENV_PREFIX = "env:"
#: the fields :meth:`ProfileAdmin.update` changes
_UPDATABLE = frozenset({"api", "source", "base_url", "model", "chat_preset", "timeouts", "review"})


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """What ``profile list`` shows: never a secret."""

    name: str
    api: str
    source: str
    model: str | None
    base_url: str | None
    active: bool
    #: one label per key of the pool: ``label (fingerprint)`` for a stored key, ``$NAME`` for
    #: an environment key
    keys: tuple[str, ...]
    #: the chain in order, as ``profile`` or ``profile:model``
    fallbacks: tuple[str, ...]
    timeouts: ProfileTimeouts
    #: the bound chat preset (``profile add --preset``), the response review setting and
    #: whether the chain's randomizer is on
    preset: str | None = None
    review: ReviewSettings | None = None
    randomize: bool = False

    @property
    def pool_size(self) -> int:
        return len(self.keys)


def parse_key(value: str) -> CredentialRef | str:
    """``env:NAME`` → a reference to that environment variable; anything else is a secret."""
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :].strip()
        if not name or not name.replace("_", "").isalnum():
            raise FormatError(
                "an environment key is env:NAME with NAME letters, digits and '_'",
                source="<key>",
                field="key",
            )
        return CredentialRef(env=name, label=name)
    if not value.strip():
        raise FormatError("an API key must not be empty", source="<key>", field="key")
    return value


def parse_fallback(value: str) -> tuple[str, str | None]:
    """``OTHER`` or ``OTHER:MODEL`` (split at the first colon: model names may hold more)."""
    profile, sep, model = value.partition(":")
    profile = profile.strip()
    if not profile or (sep and not model.strip()):
        raise FormatError(
            f"a fallback is PROFILE or PROFILE:MODEL, not {value!r}",
            source="<fallback>",
            field="fallback",
        )
    return profile, model.strip() or None


def _entry_label(entry: FallbackEntry) -> str:
    return f"{entry.profile}:{entry.model}" if entry.model else entry.profile


class ProfileFields(TypedDict, total=False):
    """A new profile's fields for :meth:`ProfileAdmin.add`: its ``api`` family (chat by
    default), ``source`` (openai by default), ``base_url``, ``model``, the pool of ``keys``
    (secrets, ``env:NAME`` specs or stored credentials), the chat ``preset``, ``timeouts``,
    response ``review``; ``replace`` overwrites a profile of that name, ``activate`` makes it
    the one in use."""

    api: ApiFamily
    source: str
    base_url: str | None
    model: str | None
    keys: Sequence[str | CredentialRef]
    preset: str | None
    timeouts: ProfileTimeouts | None
    review: ReviewSettings | None
    replace: bool
    activate: bool


class ProfileAdmin:
    """The connection profiles of one owner (see the module docstring)."""

    def __init__(self, store: Store, owner: str) -> None:
        self.store = store
        self.owner = owner

    # -- profiles ----------------------------------------------------------------------------

    async def get(self, name: str) -> ConnectionProfile:
        try:
            profile = await self.store.get(PROFILE, name, owner=self.owner)
        except NotFound:
            profile = None
        if not isinstance(profile, ConnectionProfile):
            raise NotFound(f"no connection profile {name!r}")
        return profile

    async def _put(self, kind: str, doc: ConnectionProfile | FallbackChain) -> None:
        """Write ``doc`` over the record of its name (a new one when there is none)."""
        try:
            stored = await self.store.get_record(kind, doc.name, owner=self.owner)
            record_id: str | None = stored.info.id
        except NotFound:
            record_id = None
        await self.store.put(kind, doc, owner=self.owner, id=record_id)

    async def add(
        self,
        name: str,
        **fields: Unpack[ProfileFields],
    ) -> ConnectionProfile:
        """Add (or with ``replace``, overwrite) profile ``name`` with a pool of ``keys`` (the
        fields: :class:`ProfileFields`).

        Everything is checked before anything is written: a bad key spec, a taken name
        without ``replace`` or an invalid field raises and stores nothing. Replacing keeps the
        profile's fallback chain and deletes the stored keys the new profile no longer uses.
        ``review`` turns response review on for the profile's chat turns (a pinned reviewer
        must name a stored profile).
        """
        unknown = sorted(set(fields) - set(ProfileFields.__annotations__))
        if unknown:
            raise TypeError(f"add() got an unexpected keyword argument {unknown[0]!r}")
        o = fields
        review = o.get("review")
        if not name.strip():
            raise FormatError("a profile needs a name", source="<profile>", field="name")
        specs = [k if isinstance(k, CredentialRef) else parse_key(k) for k in o.get("keys", ())]
        old: ConnectionProfile | None = None
        try:
            old = await self.get(name)
        except NotFound:
            old = None
        if old is not None and not o.get("replace", False):
            raise Conflict(f"a profile named {name!r} exists; replace it to overwrite")
        await self._check_reviewer(name, review)
        draft = ConnectionProfile(
            name=name,
            api=o.get("api", "chat"),
            source=o.get("source", "openai"),
            base_url=o.get("base_url"),
            model=o.get("model"),
            chat_preset=o.get("preset"),
            timeouts=o.get("timeouts") or ProfileTimeouts(),
            fallback_chain=old.fallback_chain if old is not None else None,
            review=review,
        )  # validated before any key is stored
        profile = await self._store_with_keys(draft, specs)
        if old is not None:
            await self._drop_unused_keys(old, profile)
        if o.get("activate", False):
            settings = await self._settings()
            settings.selections.profile = name
            await self.store.put_settings(settings, owner=self.owner)
        return profile

    async def _store_with_keys(
        self, draft: ConnectionProfile, specs: Sequence[str | CredentialRef]
    ) -> ConnectionProfile:
        """Store ``draft`` with the pool ``specs`` (each secret stored as a key of its own
        first); nothing half-written: the keys of a profile that was not stored are deleted."""
        name = draft.name
        credentials: list[CredentialRef] = []
        added: list[str] = []
        try:
            for n, spec in enumerate(specs, start=1):
                if isinstance(spec, CredentialRef):
                    credentials.append(spec)
                    continue
                label = name if len(specs) == 1 else f"{name} #{n}"
                key_id = await self.store.add_api_key(
                    draft.source, spec, owner=self.owner, label=label
                )
                added.append(key_id)
                credentials.append(CredentialRef(key_id=key_id, label=label))
            profile = draft.model_copy(update={"credentials": credentials})
            await self._put(PROFILE, profile)
        except BaseException:
            for key_id in added:
                await self.store.delete_api_key(key_id, owner=self.owner)
            raise
        return profile

    async def _drop_unused_keys(self, old: ConnectionProfile, new: ConnectionProfile) -> None:
        kept = {c.key_id for c in new.credentials if c.key_id}
        await self._delete_keys([c for c in old.credentials if c.key_id not in kept])

    async def update(
        self,
        name: str,
        changes: Mapping[str, object],
        *,
        keys: Sequence[str | CredentialRef] | None = None,
    ) -> ConnectionProfile:
        """Change fields of profile ``name`` (``changes``: field name -> value, among
        ``api``, ``source``, ``base_url``, ``model``, ``chat_preset``, ``timeouts``,
        ``review``); everything else stays, its key pool too unless ``keys`` replaces it (the
        stored keys no longer used are deleted). Checked before anything is written."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            field = sorted(unknown)[0]
            raise FormatError(f"a profile has no field {field!r} to change", field=field)
        old = await self.get(name)
        review = changes.get("review", old.review)
        await self._check_reviewer(name, review if isinstance(review, ReviewSettings) else None)
        try:
            draft = ConnectionProfile.model_validate({**old.model_dump(), **changes})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "profile"
            raise FormatError(str(first["msg"]), source="<profile>", field=where) from None
        if keys is None:
            await self._put(PROFILE, draft)
            return draft
        specs = [k if isinstance(k, CredentialRef) else parse_key(k) for k in keys]
        profile = await self._store_with_keys(draft, specs)
        await self._drop_unused_keys(old, profile)
        return profile

    async def _settings(self) -> Settings:
        stored = await self.store.get_settings(owner=self.owner)
        return stored if isinstance(stored, Settings) else Settings()

    async def _delete_keys(self, refs: Sequence[CredentialRef]) -> None:
        for ref in refs:
            if ref.key_id:
                try:
                    await self.store.delete_api_key(ref.key_id, owner=self.owner)
                except NotFound:
                    continue  # already gone: the goal is reached

    async def remove(self, name: str) -> None:
        """Remove profile ``name``, the keys stored for it and the chain made for it."""
        profile = await self.get(name)
        await self._delete_keys(profile.credentials)
        if profile.fallback_chain == name:
            with contextlib.suppress(NotFound):
                await self.store.delete(CHAIN, name, owner=self.owner)
        await self.store.delete(PROFILE, name, owner=self.owner)
        settings = await self._settings()
        if settings.selections.profile == name:
            settings.selections.profile = None
            await self.store.put_settings(settings, owner=self.owner)

    # -- fallback chains ---------------------------------------------------------------------

    async def _chain(self, profile: ConnectionProfile) -> FallbackChain:
        if profile.fallback_chain:
            try:
                chain = await self.store.get(CHAIN, profile.fallback_chain, owner=self.owner)
            except NotFound:
                chain = None
            if isinstance(chain, FallbackChain):
                return chain
            return FallbackChain(name=profile.fallback_chain)
        return FallbackChain(name=profile.name)

    async def _check_reviewer(self, name: str, review: ReviewSettings | None) -> None:
        pinned = review.reviewer_profile if review is not None else None
        if pinned and pinned != name:
            await self.get(pinned)  # NotFound names the missing reviewer profile

    async def set_review(self, name: str, review: ReviewSettings | None) -> ConnectionProfile:
        """Set (``None``: clear) the response review of profile ``name``'s chat turns."""
        profile = await self.get(name)
        await self._check_reviewer(name, review)
        profile = profile.model_copy(update={"review": review})
        await self._put(PROFILE, profile)
        return profile

    async def set_randomize(self, name: str, on: bool) -> FallbackChain:
        """Turn the randomizer of ``name``'s fallback chain on or off (brief 003: each turn
        promotes one pool member to lead, seeded per turn)."""
        profile = await self.get(name)
        if not profile.fallback_chain:
            raise NotFound(f"{name!r} has no fallback chain to randomize; add a fallback first")
        chain = (await self._chain(profile)).model_copy(update={"randomize": on})
        await self._put(CHAIN, chain)
        return chain

    async def set_fallbacks(
        self,
        name: str,
        entries: Sequence[tuple[str, str | None]],
        *,
        randomize: bool = False,
    ) -> FallbackChain:
        """Make ``name``'s fallback chain exactly ``entries`` (``(profile, model)`` in order;
        each must name a stored profile, none twice, and not ``name`` itself with its own
        model) with the randomizer ``randomize``. Checked before anything is written."""
        profile = await self.get(name)
        chosen: list[FallbackEntry] = []
        for other, model in entries:
            await self.get(other)
            entry = FallbackEntry(profile=other, model=model or None)
            if other == name and (entry.model is None or entry.model == profile.model):
                raise Conflict(f"{name!r} cannot be its own fallback with the same model")
            if entry in chosen:
                raise Conflict(f"{_entry_label(entry)} is twice in {name!r}'s fallback chain")
            chosen.append(entry)
        if not chosen and not randomize and not profile.fallback_chain:
            return FallbackChain(name=name)  # nothing to store
        chain = (await self._chain(profile)).model_copy(
            update={"entries": chosen, "randomize": randomize}
        )
        await self._put(CHAIN, chain)
        if profile.fallback_chain != chain.name:
            await self._put(PROFILE, profile.model_copy(update={"fallback_chain": chain.name}))
        return chain

    async def fallbacks(self, name: str) -> list[FallbackEntry]:
        """Profile ``name``'s fallback chain, in order."""
        profile = await self.get(name)
        return list((await self._chain(profile)).entries) if profile.fallback_chain else []

    async def add_fallback(
        self, name: str, other: str, *, model: str | None = None
    ) -> list[FallbackEntry]:
        """Append ``other`` (optionally with another ``model``) to ``name``'s chain."""
        profile = await self.get(name)
        await self.get(other)  # a chain entry must name a profile that exists
        if other == name and (model is None or model == profile.model):
            raise Conflict(f"{name!r} cannot be its own fallback with the same model")
        chain = await self._chain(profile)
        entry = FallbackEntry(profile=other, model=model)
        if any(e.profile == other and e.model == model for e in chain.entries):
            raise Conflict(f"{_entry_label(entry)} is already in {name!r}'s fallback chain")
        chain = chain.model_copy(update={"entries": [*chain.entries, entry]})
        await self._put(CHAIN, chain)
        if profile.fallback_chain != chain.name:
            await self._put(PROFILE, profile.model_copy(update={"fallback_chain": chain.name}))
        return list(chain.entries)

    async def remove_fallback(
        self, name: str, other: str, *, model: str | None = None
    ) -> list[FallbackEntry]:
        """Remove ``other`` (with ``model``, when given) from ``name``'s chain."""
        profile = await self.get(name)
        chain = await self._chain(profile)
        kept = [
            e
            for e in chain.entries
            if not (e.profile == other and (model is None or e.model == model))
        ]
        if len(kept) == len(chain.entries) or not profile.fallback_chain:
            label = f"{other}:{model}" if model else other
            raise NotFound(f"{label} is not in {name!r}'s fallback chain")
        await self._put(CHAIN, chain.model_copy(update={"entries": kept}))
        return kept

    # -- listing -----------------------------------------------------------------------------

    async def summaries(self) -> list[ProfileSummary]:
        """Every profile with its pool and chain, by name; never a secret."""
        store, owner = self.store, self.owner
        keys = {
            k.id: f"{k.label or k.provider} ({k.fingerprint})"
            for k in await store.list_api_keys(owner=owner)
        }
        active = (await self._settings()).selections.profile
        out = []
        for info in await store.list(PROFILE, owner=owner):
            profile = await store.get(PROFILE, info.id, owner=owner)
            if not isinstance(profile, ConnectionProfile):
                continue
            labels = tuple(
                keys.get(c.key_id, "missing key") if c.key_id else f"${c.env}"
                for c in profile.credentials
                if c.key_id or c.env
            )
            chain = await self._chain(profile) if profile.fallback_chain else None
            out.append(
                ProfileSummary(
                    name=profile.name,
                    api=profile.api,
                    source=profile.source,
                    model=profile.model,
                    base_url=profile.base_url,
                    active=profile.name == active,
                    keys=labels,
                    fallbacks=tuple(_entry_label(e) for e in chain.entries) if chain else (),
                    timeouts=profile.timeouts,
                    preset=profile.chat_preset,
                    review=profile.review,
                    randomize=chain.randomize if chain else False,
                )
            )
        return sorted(out, key=lambda s: s.name)
