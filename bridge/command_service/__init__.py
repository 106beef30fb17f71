"""The command door's I/O (docs/commands.md): every command exactly once (service.py), after the token's and the
directory's checks (admission.py), prompts on the runtime that holds the session's conversation
(prompt_router.py, legacy_prompts.py), the bridge's own legacy queue (legacy_queue.py), attachments read from
the disk (attachment_files.py), question replies (questions.py). What a command *is* — bodies, scopes, derived
ids, the pure policies — is bridge.commands, below the store."""

from bridge.command_service.service import EXIT_AFTER_UPSTREAM_ENV, CommandService, DoorSettings, Outcome

__all__ = ["EXIT_AFTER_UPSTREAM_ENV", "CommandService", "DoorSettings", "Outcome"]
