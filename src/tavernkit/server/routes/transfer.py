"""Import (every format the library reads, recognised by content, from a multipart upload or
a raw body; capped by the server's upload limit) and export (every format it writes)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response, UploadFile
from pydantic import BaseModel

from tavernkit.errors import FormatError
from tavernkit.library import ImportResult
from tavernkit.server.auth import UserTavern

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
        data = await upload.read()
        source = upload.filename or "<upload>"
        found = await tk.library.import_bytes(
            data, source=source, character=character, replace=replace
        )
        results.extend(Imported.of(r) for r in found)
    return results


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
    data = await request.body()
    if not data:
        raise FormatError("the request body is empty", source=name)
    found = await tk.library.import_bytes(data, source=name, character=character, replace=replace)
    return [Imported.of(r) for r in found]


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
