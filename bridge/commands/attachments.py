"""Prompt attachments (docs/commands.md, "Attachments"), pure: the `files` of a prompt body checked and
made canonical, and the upstream parts built from them.

`files: [{path | url, mime, filename?}]`: `path` names a file inside the session's directory (checked
against the file system by bridge.command_service.attachment_files, which gives its absolute resolved path),
`url` is a `data:` URL. At most MAX_FILES files and MAX_TOTAL_BYTES in all; images and text. They are
sent as OpenCode's own clients attach them: a legacy `file` part `{type, mime, filename, url}` with a
`file://` URL or the `data:` URL (docs/upstream.md §21); v2 takes `prompt.files: [{uri, name}]`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote_to_bytes

MAX_FILES = 10
MAX_TOTAL_BYTES = 10 * 1024 * 1024
MAX_PATH_CHARS = 4096
MAX_FILENAME_CHARS = 255
# A data: URL of MAX_TOTAL_BYTES in base64, plus room for the header.
MAX_URL_CHARS = MAX_TOTAL_BYTES * 4 // 3 + 256

_MIME = re.compile(r"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*")
# The same rules as regular expressions, for the OpenAPI document (tests/unit/test_contract_rules.py keeps
# them equal to `_MIME` + `allowed_mime` and to `data_url_bytes`' acceptance).
MIME_PATTERN = ("^(?:(?:image|text)/[a-z0-9][a-z0-9.+-]*|application/(?:json|xml|x-yaml|yaml|javascript|toml|x-sh))$")
DATA_URL_PATTERN = ("^data:[^,;\\u0000]+(?:;[^,;=\\u0000]+=[^,;\\u0000]*)*(?:;base64,(?:[A-Za-z0-9+/]{4})*"
                    "(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?|,[^\\u0000]*)$")
_DATA_URL = re.compile(r"data:([^,;]+)((?:;[^,;=]+=[^,;]*)*)(;base64)?,(.*)", re.DOTALL)
_TEXT_LIKE = ("application/json", "application/xml", "application/x-yaml", "application/yaml",
              "application/javascript", "application/toml", "application/x-sh")


class AttachmentError(ValueError):
    """A refused `files` entry: a `bad_request` with this message."""


def _bad(message: str) -> AttachmentError:
    return AttachmentError(message)


def allowed_mime(mime: str) -> bool:
    """Images and text, as the serve's clients attach them (other types are refused: they would reach the
    model as a file it cannot read)."""
    return mime.startswith(("image/", "text/")) or mime in _TEXT_LIKE


def data_url_bytes(url: str) -> int:
    """The decoded size of a `data:` URL; a malformed one is an AttachmentError."""
    m = _DATA_URL.fullmatch(url)
    if m is None or "\x00" in url:  # NUL: not storable (the command's row keeps its arguments)
        raise _bad("a file url must be a data: URL (data:<mime>[;base64],<data>)")
    payload = m.group(4)
    if m.group(3):
        try:
            return len(base64.b64decode(payload, validate=True))
        except (binascii.Error, ValueError):
            raise _bad("a file's data: URL is not valid base64") from None
    return len(payload.encode())


def parse_files(raw: object) -> list[dict[str, Any]]:
    """The canonical `files` of a prompt: each `{path | url, mime, filename?}` (only those keys), checked
    for shape, count, media type and, for `data:` URLs, size. Paths are checked later, on the disk."""
    if not isinstance(raw, list):
        raise _bad("files must be a list")
    if len(raw) > MAX_FILES:
        raise _bad(f"at most {MAX_FILES} files")
    out: list[dict[str, Any]] = []
    total = 0
    for f in raw:
        if not isinstance(f, dict):
            raise _bad("each file is an object {path | url, mime, filename?}")
        path, url = f.get("path"), f.get("url")
        if (path is None) == (url is None):
            raise _bad("each file has exactly one of path and url")
        mime = f.get("mime")
        if not isinstance(mime, str) or _MIME.fullmatch(mime) is None:
            raise _bad("each file needs a mime type such as text/plain or image/png")
        if not allowed_mime(mime):
            raise _bad(f"files may be images or text, not {mime}")
        item: dict[str, Any] = {"mime": mime}
        if path is not None:
            if not isinstance(path, str) or not 1 <= len(path) <= MAX_PATH_CHARS or "\x00" in path:
                raise _bad(f"a file path is a string of 1 to {MAX_PATH_CHARS} characters without NUL")
            item["path"] = path
        else:
            if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
                raise _bad("a file url is a data: URL of at most 10 MiB")
            total += data_url_bytes(url)
            item["url"] = url
        name = f.get("filename")
        if name is not None:
            if not isinstance(name, str) or not 1 <= len(name) <= MAX_FILENAME_CHARS or "\x00" in name:
                raise _bad(f"a filename is a string of 1 to {MAX_FILENAME_CHARS} characters without NUL")
            item["filename"] = name
        out.append(item)
    if total > MAX_TOTAL_BYTES:
        raise _bad("the files are larger than 10 MiB in all")
    return out


def file_url(resolved_path: str) -> str:
    """`file://` + the absolute path, percent-quoted as a URL path."""
    return "file://" + quote(resolved_path)


def legacy_file_parts(files: Sequence[Mapping[str, Any]], resolved: Mapping[str, str]) -> list[dict[str, Any]]:
    """Legacy `file` parts (docs/upstream.md §21); `resolved` maps each `path` to its checked real path."""
    parts: list[dict[str, Any]] = []
    for f in files:
        url = file_url(resolved[f["path"]]) if "path" in f else f["url"]
        name = f.get("filename") or (resolved[f["path"]].rsplit("/", 1)[-1] if "path" in f else "attachment")
        parts.append({"type": "file", "mime": f["mime"], "filename": name, "url": url})
    return parts


def v2_files(files: Sequence[Mapping[str, Any]], resolved: Mapping[str, str]) -> list[dict[str, Any]]:
    """v2 `prompt.files` items `{uri, name}` (the serve's prompt schema) for the images: the v2 runtime of
    1.18.33 hands every file to the provider as a media part, which an OpenAI-compatible provider refuses
    for text ("does not support media type text/plain"), so text files go into the prompt's text instead
    (`v2_text`)."""
    out: list[dict[str, Any]] = []
    for f, part in zip(files, legacy_file_parts(files, resolved), strict=True):
        if not is_text(str(f["mime"])):
            out.append({"uri": part["url"], "name": part["filename"]})
    return out


def is_text(mime: str) -> bool:
    return not mime.startswith("image/")


def v2_text(text: str, files: Sequence[Mapping[str, Any]], resolved: Mapping[str, str],
            contents: Mapping[int, str]) -> str:
    """The prompt's text with each text file appended as `<file name path>content</file>` (the way the
    legacy runtime adds a read file's content to the user message, docs/upstream.md §21); `contents` maps
    the file's index to its text."""
    out = [text]
    for i, f in enumerate(files):
        if i not in contents:
            continue
        where = resolved.get(f.get("path", ""), "")
        name = f.get("filename") or (where.rsplit("/", 1)[-1] if where else "attachment")
        attrs = f' name="{name}"' + (f' path="{where}"' if where else "")
        out.append(f"<file{attrs}>\n{contents[i]}\n</file>")
    return "\n\n".join(out)


def data_url_text(url: str) -> str:
    """The decoded text of a `data:` URL (UTF-8, undecodable bytes replaced)."""
    m = _DATA_URL.fullmatch(url)
    if m is None or "\x00" in url:  # NUL: not storable (the command's row keeps its arguments)
        raise AttachmentError("a file url must be a data: URL")
    raw = base64.b64decode(m.group(4)) if m.group(3) else unquote_to_bytes(m.group(4))
    return raw.decode("utf-8", errors="replace")
