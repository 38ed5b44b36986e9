"""Import (every format the library reads, recognised by content, from a multipart upload or
a raw body; capped by the server's upload limit, ``--max-upload``) and export (every format it
writes). An upload goes to a temporary file as it arrives and is imported from there: a chat
is then read a batch at a time (:meth:`~tavernkit.library.Library.import_file`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, BinaryIO, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response, UploadFile
from pydantic import BaseModel

from tavernkit.errors import FormatError, TavernKitError
from tavernkit.library_results import ImportResult
from tavernkit.server.auth import UserTavern
from tavernkit.server.errors import is_unavailable, status_for
from tavernkit.server.task_errors import safe_text

__all__ = ["router"]

router = APIRouter(tags=["import and export"])

_MEDIA = {
    "png": "image/png",
    "json": "application/json",
    "charx": "application/zip",
    "jsonl": "application/x-ndjson",
    "yaml": "application/yaml",
}
#: the kinds an export may name: the library's EXPORT_FORMATS (a test keeps them equal)
ExportKind = Literal[
    "character",
    "chat",
    "chat_preset",
    "chatluna_preset",
    "context",
    "group",
    "instruct",
    "kobold_preset",
    "lorebook",
    "novel_preset",
    "quick_reply_set",
    "reasoning",
    "sysprompt",
    "textgen_preset",
]
ExportFormat = Literal["charx", "json", "jsonl", "png", "yaml"]


class Imported(BaseModel):
    kind: str
    name: str
    id: str
    #: imported, unchanged (the same record was there), replaced, kept or linked (a chat
    #: imported before its character, attached to it now)
    status: str
    source: str
    note: str

    @classmethod
    def of(cls, r: ImportResult) -> Imported:
        return cls(kind=r.kind, name=r.name, id=r.id, status=r.status, source=r.source, note=r.note)


Character = Annotated[
    str | None, Query(description="the character a chat file is imported for (id or name)")
]
Replace = Annotated[bool, Query(description="replace a different record of the same name")]


@router.post("/import", status_code=201)
async def import_files(
    file: list[UploadFile], tk: UserTavern, character: Character = None, replace: Replace = False
) -> list[Imported]:
    """Import the uploaded files (multipart ``file`` parts). Each is recognised by its
    content, not its name; one that cannot be read is a 422 naming it, and the files before
    it stay imported."""
    results: list[Imported] = []
    for upload in file:
        source = upload.filename or "<upload>"
        async with _temp_file() as path:
            await asyncio.to_thread(_copy_out, upload.file, path)
            found = await tk.library.import_file(
                path, source=source, character=character, replace=replace
            )
        results.extend(Imported.of(r) for r in found)
    return results


class FileError(BaseModel):
    type: str
    message: str


class FileImported(BaseModel):
    """One uploaded file's outcome in a batch: what it imported, or why it could not be."""

    source: str
    imported: list[Imported] = []
    error: FileError | None = None


@router.post("/import/each", status_code=200)
async def import_each(
    file: list[UploadFile], tk: UserTavern, character: Character = None, replace: Replace = False
) -> list[FileImported]:
    """Import the uploaded files (multipart ``file`` parts, at most 1,000 a request) each on
    its own: a file that cannot be imported (unreadable, or a name taken by a different
    record, ``NameTaken``) is answered with its error, and the others are imported all the
    same. For a folder of cards sent a few files a request, with progress between them."""
    results: list[FileImported] = []
    for upload in file:
        source = upload.filename or "<upload>"
        try:
            async with _temp_file() as path:
                await asyncio.to_thread(_copy_out, upload.file, path)
                found = await tk.library.import_file(
                    path, source=source, character=character, replace=replace
                )
        except TavernKitError as exc:
            if not _the_files_fault(exc):
                raise  # the store or the account, not this file: the request fails
            error = FileError(type=type(exc).__name__, message=safe_text(exc))
            results.append(FileImported(source=source, error=error))
            continue
        results.append(FileImported(source=source, imported=[Imported.of(r) for r in found]))
    return results


def _the_files_fault(exc: TavernKitError) -> bool:
    """Whether ``exc`` is about the file (its content, its name taken): a 409, 413 or 422."""
    return not is_unavailable(exc) and status_for(exc) in (409, 413, 422)


@router.post(
    "/import/raw",
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def import_raw(
    request: Request,
    tk: UserTavern,
    name: Annotated[str, Query(max_length=500, description="a file name for messages")] = "<body>",
    character: Character = None,
    replace: Replace = False,
) -> list[Imported]:
    """Import the request body itself (any format the library reads)."""
    async with _temp_file() as path:
        with path.open("wb") as out:
            async for chunk in request.stream():
                out.write(chunk)  # a chunk (64 KiB at most): a short write to the page cache
        if path.stat().st_size == 0:
            raise FormatError("the request body is empty", source=name)
        found = await tk.library.import_file(
            path, source=name, character=character, replace=replace
        )
    return [Imported.of(r) for r in found]


@asynccontextmanager
async def _temp_file() -> AsyncIterator[Path]:
    """A private temporary file for an upload (the body goes to disk as it arrives, so a
    60 MB chat is never held in memory whole), removed afterwards."""
    fd, name = await asyncio.to_thread(tempfile.mkstemp, prefix="tavernkit-upload-")
    os.close(fd)
    path = Path(name)
    try:
        yield path
    finally:
        await asyncio.to_thread(path.unlink, missing_ok=True)


def _copy_out(upload: BinaryIO, path: Path) -> None:
    upload.seek(0)
    with path.open("wb") as out:
        shutil.copyfileobj(upload, out, 1024 * 1024)


@router.get("/export/{kind}/{ref}", response_class=Response)
async def export_record(
    kind: ExportKind,
    ref: str,
    tk: UserTavern,
    format: Annotated[ExportFormat, Query()] = "json",
    spec: Annotated[Literal["v2", "v3"], Query()] = "v2",
) -> Response:
    """The record (id or name) in one of SillyTavern's formats: a character as ``png``,
    ``json`` or ``charx``; a chat as ``jsonl``; a lorebook, preset or group as ``json``; a
    ChatLuna preset as ``yaml``."""
    found, data = await tk.library.export_bytes(ref, format, kind=kind, spec=spec)
    filename = quote(f"{found.name}.{format}")
    return Response(
        data,
        media_type=_MEDIA[format],
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
    )
