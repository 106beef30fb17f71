"""The command door's I/O, in one package (docs/commands.md): built and entered through door.py (the HTTP
routes and the WebSocket `command` op are its two thin adapters), every command exactly once (service.py),
after the token's and the directory's checks (admission.py), prompts on the runtime that holds the session's
conversation (prompt_router.py, legacy_prompts.py), the bridge's own legacy queue (legacy_queue.py),
attachments read from the disk (attachment_files.py), question replies (questions.py), where a session lives
(directory.py), its rows through one store seam (rows.py). What a command *is* — bodies, scopes, derived ids,
the pure policies — is bridge.commands, below the store."""

from bridge.command_service.service import EXIT_AFTER_UPSTREAM_ENV, CommandService, DoorSettings, Outcome

__all__ = ["EXIT_AFTER_UPSTREAM_ENV", "CommandService", "DoorSettings", "Outcome"]
