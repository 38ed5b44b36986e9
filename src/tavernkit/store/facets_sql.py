"""The characters' facets (migration 014) in both dialects: the tables and the triggers that
keep the favourite flag, each card's tags, the cards per tag and each character's latest chat
from the cards' JSON, so the listing reads indexes, never the cards.

Kept apart from :mod:`tavernkit.store.migrations` because it is the one migration whose SQL is
mostly written twice (SQLite's triggers, PostgreSQL's plpgsql functions) from shared pieces.
"""

from __future__ import annotations

__all__ = ["M014_STATEMENTS", "PG_M014_STATEMENTS"]

#: the characters' facets (014): the favourite flag in a column of ``records`` (in a listing
#: index of its own: favourites first, then by name) and each card's tags in ``record_tags``,
#: with the number of cards per owner and tag in ``tag_counts``, all kept by triggers from the
#: card's JSON on every write (a save, an edit of one member, a hand-over, a delete), so the tag
#: chips, the tag and favourite filters and the favourites-first order read indexes, never the
#: cards. What counts as a favourite and as a tag is
#: :func:`tavernkit.server.card_facets.facets_of`'s: ``data.extensions.fav`` (else the V1
#: ``fav``) true or the string ``"true"``; the strings of ``data.tags`` (else of ``tags``),
#: trimmed, empty ones left out, each once per card.
M014_TABLES: tuple[str, ...] = (
    "ALTER TABLE records ADD COLUMN fav INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX records_listed_by_fav ON records "
    "(owner, kind, fav DESC, lower(name), name, created, id, updated)",
    "CREATE TABLE record_tags (record_id TEXT NOT NULL, owner TEXT NOT NULL, "
    "tag TEXT NOT NULL, PRIMARY KEY (record_id, tag))",
    "CREATE INDEX record_tags_by_tag ON record_tags (owner, tag, record_id)",
    "CREATE TABLE tag_counts (owner TEXT NOT NULL, tag TEXT NOT NULL, "
    "n BIGINT NOT NULL, PRIMARY KEY (owner, tag))",
    # the latest chat's time of each character that has one (the order by latest chat); its
    # columns are named apart from records' so the listing's SQL joins them unqualified
    "CREATE TABLE character_chats (record_id TEXT PRIMARY KEY, chat_owner TEXT NOT NULL, "
    "last_chat TEXT NOT NULL)",
    "CREATE INDEX character_chats_by_time ON character_chats (chat_owner, last_chat DESC, "
    "record_id)",
)
_CHATTED = (
    "INSERT INTO character_chats (record_id, chat_owner, last_chat) {rows} "
    "ON CONFLICT (record_id) DO UPDATE SET chat_owner = excluded.chat_owner, "
    "last_chat = CASE WHEN excluded.last_chat > character_chats.last_chat "
    "THEN excluded.last_chat ELSE character_chats.last_chat END"
)


def _rechatted(row: str) -> str:
    """Statements that set the latest chat time of ``row``'s character from its chats (the
    chats index: owner, character, time) or forget it when it has none left."""
    rows = (
        f"SELECT c, o, m FROM (SELECT {row}.character_id AS c, {row}.owner AS o, "
        f"max(updated) AS m FROM chats WHERE owner = {row}.owner "
        f"AND character_id = {row}.character_id) x WHERE m IS NOT NULL"
    )
    return f"DELETE FROM character_chats WHERE record_id = {row}.character_id; " + _CHATTED.format(
        rows=rows
    )


_CHAT_TOUCHED = _CHATTED.format(rows="VALUES (NEW.character_id, NEW.owner, NEW.updated)")
_CHATTED_FILL = _CHATTED.format(
    rows="SELECT character_id, owner, max(updated) FROM chats "
    "WHERE character_id IS NOT NULL GROUP BY character_id, owner"
)
_MOVED = "OLD.character_id IS NOT NEW.character_id OR OLD.owner IS NOT NEW.owner"
_TAG_IN = (
    "INSERT INTO tag_counts (owner, tag, n) VALUES (NEW.owner, NEW.tag, 1) "
    "ON CONFLICT (owner, tag) DO UPDATE SET n = tag_counts.n + 1"
)
_TAG_OUT = (
    "UPDATE tag_counts SET n = n - 1 WHERE owner = OLD.owner AND tag = OLD.tag; "
    "DELETE FROM tag_counts WHERE owner = OLD.owner AND tag = OLD.tag AND n <= 0"
)
#: what str.strip() takes off a tag (the ASCII whitespace)
_WS_SQLITE = "char(32, 9, 10, 11, 12, 13)"


def _sqlite_true(row: str, path: str) -> str:
    at = f"{row}.data, '{path}'"
    return (  # json_type of a missing member is NULL: no favourite
        f"coalesce(json_type({at}) = 'true' OR (json_type({at}) = 'text' "
        f"AND lower(trim(json_extract({at}), {_WS_SQLITE})) = 'true'), 0)"
    )


def _sqlite_fav(row: str) -> str:
    ext = "$.data.extensions.fav"
    return (
        f"CASE WHEN json_type({row}.data, '{ext}') IS NULL THEN {_sqlite_true(row, '$.fav')} "
        f"ELSE {_sqlite_true(row, ext)} END"
    )


def _sqlite_tagging(row: str) -> str:
    path = (
        f"(CASE WHEN json_type({row}.data, '$.data.tags') = 'array' "
        "THEN '$.data.tags' ELSE '$.tags' END)"
    )
    tag = f"trim(j.value, {_WS_SQLITE})"
    return (
        f"INSERT INTO record_tags (record_id, owner, tag) SELECT {row}.id, {row}.owner, {tag} "
        f"FROM json_each({row}.data, {path}) j WHERE {row}.kind = 'character' "
        f"AND json_type({row}.data, {path}) = 'array' AND j.type = 'text' AND {tag} <> '' "
        "ON CONFLICT DO NOTHING"
    )


_FAV_OF_NEW = f"(CASE WHEN NEW.kind = 'character' THEN {_sqlite_fav('NEW')} ELSE 0 END)"
#: the whole of 014 on SQLite: every card's facets are filled by the edit trigger, run once
M014_STATEMENTS: tuple[str, ...] = (
    *M014_TABLES,
    f"CREATE TRIGGER record_tags_counted_in AFTER INSERT ON record_tags BEGIN {_TAG_IN}; END",
    f"CREATE TRIGGER record_tags_counted_out AFTER DELETE ON record_tags BEGIN {_TAG_OUT}; END",
    # the row is written again only when its flag changes (a favourite made, or unmade): a
    # card's save rewrites no row twice, and no other kind's (a 28 MB lorebook) ever is
    "CREATE TRIGGER records_faceted_in AFTER INSERT ON records WHEN NEW.kind = 'character' "
    f"BEGIN UPDATE records SET fav = 1 WHERE id = NEW.id AND {_sqlite_fav('NEW')}; "
    f"{_sqlite_tagging('NEW')}; END",
    "CREATE TRIGGER records_faceted_edit AFTER UPDATE OF data, owner, kind ON records "
    "WHEN NEW.kind = 'character' OR OLD.kind = 'character' BEGIN "
    "DELETE FROM record_tags WHERE record_id = OLD.id; "
    f"UPDATE records SET fav = {_FAV_OF_NEW} WHERE id = NEW.id AND fav IS NOT {_FAV_OF_NEW}; "
    f"{_sqlite_tagging('NEW')}; END",
    # a chat written (a message, a streamed piece) moves its character's time forward
    "CREATE TRIGGER chats_chatted_in AFTER INSERT ON chats WHEN NEW.character_id IS NOT NULL "
    f"BEGIN {_CHAT_TOUCHED}; END",
    "CREATE TRIGGER chats_chatted_touch AFTER UPDATE OF updated ON chats "
    f"WHEN NEW.character_id IS NOT NULL AND NOT ({_MOVED}) BEGIN {_CHAT_TOUCHED}; END",
    "CREATE TRIGGER chats_chatted_moved AFTER UPDATE OF character_id, owner ON chats "
    f"WHEN {_MOVED} BEGIN {_rechatted('OLD')}; {_rechatted('NEW')}; END",
    "CREATE TRIGGER chats_chatted_out AFTER DELETE ON chats WHEN OLD.character_id IS NOT NULL "
    f"BEGIN {_rechatted('OLD')}; END",
    _CHATTED_FILL,
    "CREATE TRIGGER records_faceted_out AFTER DELETE ON records WHEN OLD.kind = 'character' "
    "BEGIN DELETE FROM record_tags WHERE record_id = OLD.id; "
    "DELETE FROM character_chats WHERE record_id = OLD.id; END",
    "UPDATE records SET data = data WHERE kind = 'character'",
)

_PG_MOVED = _MOVED.replace("IS NOT", "IS DISTINCT FROM")
#: PostgreSQL's: plpgsql functions behind row triggers (the favourite set before the row is
#: written, the tags after)
_WS_PG = "' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)"
PG_M014_STATEMENTS: tuple[str, ...] = (
    *M014_TABLES,
    f"""CREATE FUNCTION tk_true(v json) RETURNS boolean IMMUTABLE LANGUAGE sql AS $$
        SELECT CASE json_typeof(v) WHEN 'boolean' THEN v::text = 'true'
            WHEN 'string' THEN lower(btrim(v #>> '{{}}', {_WS_PG})) = 'true' ELSE false END
    $$""",
    """CREATE FUNCTION tk_fav(d json) RETURNS integer IMMUTABLE LANGUAGE sql AS $$
        SELECT CASE WHEN (d -> 'data' -> 'extensions' -> 'fav') IS NULL
            THEN tk_true(d -> 'fav') ELSE tk_true(d -> 'data' -> 'extensions' -> 'fav')
        END::integer
    $$""",
    """CREATE FUNCTION tk_tags(d json) RETURNS json IMMUTABLE LANGUAGE sql AS $$
        SELECT CASE WHEN json_typeof(d -> 'data' -> 'tags') = 'array' THEN d -> 'data' -> 'tags'
            WHEN json_typeof(d -> 'tags') = 'array' THEN d -> 'tags' ELSE '[]'::json END
    $$""",
    """CREATE FUNCTION tk_fav_records() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.fav := CASE WHEN NEW.kind = 'character' THEN tk_fav(NEW.data::json) ELSE 0 END;
        RETURN NEW;
    END $$""",
    "CREATE TRIGGER records_faved BEFORE INSERT OR UPDATE OF data, kind ON records "
    "FOR EACH ROW EXECUTE FUNCTION tk_fav_records()",
    f"""CREATE FUNCTION tk_tag_records() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            DELETE FROM record_tags WHERE record_id = OLD.id;
        END IF;
        IF TG_OP = 'DELETE' THEN
            DELETE FROM character_chats WHERE record_id = OLD.id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.kind = 'character' THEN
            INSERT INTO record_tags (record_id, owner, tag)
            SELECT NEW.id, NEW.owner, t FROM (
                SELECT btrim(e #>> '{{}}', {_WS_PG}) AS t
                FROM json_array_elements(tk_tags(NEW.data::json)) e
                WHERE json_typeof(e) = 'string'
            ) x WHERE t <> '' ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION tk_chatted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NOT ({_PG_MOVED})) THEN
            IF NEW.character_id IS NOT NULL THEN {_CHAT_TOUCHED}; END IF;
        ELSE
            IF OLD.character_id IS NOT NULL THEN {_rechatted("OLD")}; END IF;
            IF TG_OP = 'UPDATE' AND NEW.character_id IS NOT NULL THEN
                {_rechatted("NEW")};
            END IF;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER chats_chatted AFTER INSERT OR DELETE OR UPDATE OF updated, character_id, "
    "owner ON chats FOR EACH ROW EXECUTE FUNCTION tk_chatted()",
    _CHATTED_FILL,
    "CREATE TRIGGER records_tagged AFTER INSERT OR DELETE OR UPDATE OF data, owner, kind "
    "ON records FOR EACH ROW EXECUTE FUNCTION tk_tag_records()",
    f"""CREATE FUNCTION tk_count_tags() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN {_TAG_OUT}; ELSE {_TAG_IN}; END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER record_tags_counted AFTER INSERT OR DELETE ON record_tags "
    "FOR EACH ROW EXECUTE FUNCTION tk_count_tags()",
    "UPDATE records SET data = data WHERE kind = 'character'",
)
