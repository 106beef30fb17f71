"""systemd credentials (`LoadCredential=<name>:<file>` → `$CREDENTIALS_DIRECTORY/<name>`, docs/operations.md):
the secrets a unit hands the daemon as files, used when their variable is unset (bridge.config)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from bridge.errors import ConfigError

CREDENTIALS = {
    "upstream-password": "upstream_password",
    "auth-secret": "auth_secret",
    "database-url": "database_url",
    "read-database-url": "read_database_url",
}


def read_credentials(env: Mapping[str, str], already_set: Collection[str]) -> dict[str, str]:
    """{settings field: value} of the credentials present and not empty, except the fields `already_set`."""
    directory = env.get("CREDENTIALS_DIRECTORY")
    if not directory:
        return {}
    out: dict[str, str] = {}
    for cred, fname in CREDENTIALS.items():
        path = Path(directory) / cred
        if fname in already_set or not path.is_file():
            continue
        try:
            raw = path.read_text().strip()
        except OSError as e:
            raise ConfigError(f"credential {cred!r} cannot be read: {e}") from None
        if raw:
            out[fname] = raw
    return out
