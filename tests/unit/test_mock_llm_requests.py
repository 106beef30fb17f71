"""The mock provider records what the model saw: every message as (role, text) and the images."""

from __future__ import annotations

import base64
import hashlib

from tests.support.mock_llm import _analyse

PNG = b"\x89PNG\r\n\x1a\nfake"


def test_every_message_of_a_request_is_recorded_with_its_role() -> None:
    body = {"messages": [
        {"role": "system", "content": "You are a helper."},
        {"role": "user", "content": "MOCK:text MARKER-A"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "user", "content": [{"type": "text", "text": "MOCK:text "}, {"type": "text", "text": "C"},
                                     {"type": "image_url", "image_url": {
                                         "url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]},
    ], "tools": [{"type": "function", "function": {"name": "bash"}}]}
    got = _analyse(body)
    assert got.messages == (("system", "You are a helper."), ("user", "MOCK:text MARKER-A"),
                            ("assistant", "Hello"), ("user", "MOCK:text C"))
    assert got.user_text == "MOCK:text C" and got.step == 0
    assert got.images == (f"image/png:{hashlib.sha256(PNG).hexdigest()}",)


def test_a_request_without_images_records_none() -> None:
    got = _analyse({"messages": [{"role": "user", "content": "hi"}]})
    assert (got.messages, got.images) == ((("user", "hi"),), ())
