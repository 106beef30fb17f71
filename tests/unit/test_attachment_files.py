"""bridge.command_service.attachment_files: the file-system side of prompt attachments — a `path` names a
regular file inside the session's directory once every symlink is resolved, the sizes count towards the
10 MiB bound, and text files are read for the v2 runtime."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bridge.command_service.attachment_files import resolve_paths, text_contents
from bridge.commands.attachments import MAX_TOTAL_BYTES, AttachmentError


def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def test_paths_must_stay_inside_the_directory(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text("no")
    (root / "link-out").symlink_to(tmp_path / "secret.txt")
    (root / "link-in").symlink_to(root / "sub" / "a.txt")
    ok = resolve_paths([{"path": "sub/a.txt", "mime": "text/plain"}, {"path": "link-in", "mime": "text/plain"},
                        {"path": str(root / "sub" / "a.txt"), "mime": "text/plain"}], str(root))
    assert set(ok.values()) == {str(root / "sub" / "a.txt")}
    for bad, why in [("../secret.txt", "not inside"), ("link-out", "not inside"), (str(tmp_path / "secret.txt"),
                     "not inside"), ("missing.txt", "does not exist"), ("sub", "not a regular file"),
                     (".", "not inside")]:
        with pytest.raises(AttachmentError, match=why):
            resolve_paths([{"path": bad, "mime": "text/plain"}], str(root))


def test_text_contents_come_from_the_disk_or_the_data_url(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("from disk")
    files = [{"path": "a.txt", "mime": "text/plain"}, {"url": "data:text/plain,inline%20text", "mime": "text/plain"},
             {"url": data_url(b"png"), "mime": "image/png"}]
    resolved = resolve_paths(files, str(tmp_path))
    assert text_contents(files, resolved) == {0: "from disk", 1: "inline text"}


def test_the_files_on_disk_and_the_inline_ones_count_towards_one_bound(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * (MAX_TOTAL_BYTES - 4))
    files = [{"path": "big.bin", "mime": "application/octet-stream"}]
    assert resolve_paths(files, str(tmp_path)) == {"big.bin": str(tmp_path / "big.bin")}
    with pytest.raises(AttachmentError, match="10 MiB"):
        resolve_paths([*files, {"url": data_url(b"12345"), "mime": "image/png"}], str(tmp_path))


def test_a_text_file_gone_before_it_is_read_is_an_attachment_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("soon gone")
    files = [{"path": "a.txt", "mime": "text/plain"}]
    resolved = resolve_paths(files, str(tmp_path))
    (tmp_path / "a.txt").unlink()
    with pytest.raises(AttachmentError, match="cannot be read"):
        text_contents(files, resolved)
