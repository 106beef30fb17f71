"""Start-up and deployment: settings and files an operator (or an attacker with write access to the state
directory) can get wrong, tokens that never expire, the unit's resource bounds, dependency floors."""

from __future__ import annotations

import os
import threading
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from bridge import auth
from bridge.auth import MAX_TTL_S, load_or_create_secret, mint_token
from bridge.cli import main
from bridge.config import load_settings
from bridge.errors import ConfigError, SecretFileError
from bridge.fanout import protocol as p

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "bridge.example"])
def test_auth_disabled_on_a_non_loopback_host_is_refused_naming_both_variables(host: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings({"BRIDGE_AUTH_DISABLED": "true", "BRIDGE_HTTP_HOST": host})
    assert "BRIDGE_AUTH_DISABLED" in str(e.value) and "BRIDGE_HTTP_HOST" in str(e.value)
    for loopback in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert load_settings({"BRIDGE_AUTH_DISABLED": "true", "BRIDGE_HTTP_HOST": loopback}).auth_disabled


@pytest.mark.parametrize("raw", ["inf", "Infinity", "nan", "-inf", "1e999"])
def test_infinite_or_nan_float_settings_are_refused(raw: str) -> None:
    for name in ("BRIDGE_IDLE_TTL_S", "BRIDGE_RECONNECT_MAX_S", "BRIDGE_READ_STATEMENT_TIMEOUT_S"):
        with pytest.raises(ConfigError, match=name):
            load_settings({name: raw})


@pytest.fixture(autouse=True)
def _fresh_secret_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "_loaded", {})


@pytest.mark.parametrize(("content", "mode"), [("", 0o600), ("short\n", 0o600), ("k" * 64, 0o644)])
def test_an_unusable_secret_file_is_a_clear_start_up_error_not_500s_later(
    tmp_path: Path, content: str, mode: int
) -> None:
    path = tmp_path / "auth_secret"
    path.write_text(content)
    path.chmod(mode)
    with pytest.raises(SecretFileError) as e:
        load_or_create_secret("", tmp_path)
    assert str(path) in str(e.value)


def test_the_start_up_line_names_the_secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "auth_secret").write_text("")
    (tmp_path / "auth_secret").chmod(0o600)
    monkeypatch.setenv("BRIDGE_STATE_DIR", str(tmp_path))
    assert main(["token"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "auth_secret" in err and "Traceback" not in err


def test_the_generated_secret_is_created_once_0600_and_shared_by_racing_starts(tmp_path: Path) -> None:
    got: list[str] = []
    start = threading.Barrier(8)

    def create() -> None:
        start.wait()
        got.append(auth._create_secret(tmp_path / "auth_secret"))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    on_disk = (tmp_path / "auth_secret").read_text().strip()
    assert set(got) == {on_disk} and len(on_disk) >= 32
    assert (tmp_path / "auth_secret").stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == ["auth_secret"]  # no temporary file left behind


def test_the_secret_is_read_once_per_process(tmp_path: Path) -> None:
    first = load_or_create_secret("", tmp_path)
    (tmp_path / "auth_secret").unlink()  # a second component asking later gets the same key, no I/O
    assert load_or_create_secret("", tmp_path) == first
    assert not (tmp_path / "auth_secret").exists()


def test_a_token_lifetime_has_a_maximum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for ttl in (MAX_TTL_S + 1, float("inf"), float("nan"), 0):
        with pytest.raises(ValueError):
            mint_token("k" * 40, "up", None, ttl)
    monkeypatch.setenv("BRIDGE_STATE_DIR", str(tmp_path))
    assert main(["token", "--ttl", "1e12"]) == 2
    assert main(["token", "--ttl", "inf"]) == 2
    assert main(["token", "--session", "x/../ses_a"]) == 2  # a token naming an id no route would accept


@pytest.mark.parametrize("frame", [
    '{"op":"subscribe","session":"ses_a","after":9223372036854775808}',  # beyond bigint: a 500 in the driver
    '{"op":"ping","id":NaN}',  # echoed back as NaN: not JSON for the client
    '{"op":"ping","id":Infinity}',
    '{"op":"ping","id":"\\ud800"}',  # echoed back unencodable: the socket write would fail
])
def test_frames_that_would_break_the_driver_or_the_reply_are_bad_message(frame: str) -> None:
    with pytest.raises(p.ProtocolError) as e:
        p.parse_client_message(frame)
    assert e.value.code == p.ERR_BAD_MESSAGE


def _service() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (REPO / "deploy" / "opencode-bridge.service").read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not line.startswith("#"):
            out.setdefault(key, []).append(value)
    return out


def test_the_unit_bounds_descriptors_memory_tasks_and_hides_other_processes() -> None:
    s = _service()
    assert int(s["LimitNOFILE"][0]) >= 4 * load_settings({}).http_max_connections
    assert s["MemoryMax"] and s["TasksMax"]
    assert s["ProtectProc"] == ["invisible"] and s["ProcSubset"] == ["pid"]
    assert "@system-service" in s["SystemCallFilter"]


def test_the_aiohttp_floor_has_the_request_smuggling_fixes_and_the_installed_one_meets_it() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(d for d in deps if d.startswith("aiohttp")).split(">=")[1]

    def as_tuple(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split(".")[:3])

    assert as_tuple(floor) >= (3, 12, 14)  # CVE-2024-52304 (3.10.11), CVE-2025-53643 (3.12.14)
    assert as_tuple(version("aiohttp")) >= as_tuple(floor)
