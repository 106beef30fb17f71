"""Plain-text rendering of a transcript for the terminal (`opencode-bridge transcript`). Pure."""

from __future__ import annotations

import json
from typing import Any


def _short(value: Any, width: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.rstrip("\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def render_transcript(entries: list[dict[str, Any]]) -> str:
    out: list[str] = []
    for e in entries:
        t = e["type"]
        if t == "user":
            started = "taken" if e.get("started_seq") is not None else "not taken yet"
            how = f"{e['delivery']}, " if e.get("delivery") else ""  # a legacy prompt has no delivery mode
            out.append(f"[{e['seq']}] USER ({how}{started}):")
            out.append(_indent(str(e.get("text") or "")))
        elif t == "assistant":
            model = e.get("model") or {}
            who = f"{e.get('agent') or '?'} · {model.get('provider') or '?'}/{model.get('id') or '?'}"
            out.append(f"[{e['seq']}] ASSISTANT ({who}):")
            for p in e["parts"]:
                out.extend(_part(p))
            tokens = e.get("tokens") or {}
            end = f"finish={e.get('finish')}" if e.get("complete") else "never finished"
            if tokens:
                end += f" tokens in={tokens.get('input')} out={tokens.get('output')}"
            if e.get("error"):
                end += f" error={_short(e['error'].get('message') if isinstance(e['error'], dict) else e['error'])}"
            if e.get("interrupted"):
                end += " (interrupted)"
            out.append(f"    — {end}")
        elif t == "agent_switch":
            out.append(f"[{e['seq']}] agent → {e.get('agent')}")
        elif t == "model_switch":
            out.append(f"[{e['seq']}] model → {_short(e.get('model'))}")
    return "\n".join(out) + "\n"


def _part(p: dict[str, Any]) -> list[str]:
    if p["type"] in ("text", "reasoning"):
        label = "text" if p["type"] == "text" else "reasoning"
        return [f"  {label}:", _indent(str(p.get("text") if p.get("text") is not None else "(unfinished)"))]
    lines = [f"  tool {p.get('tool')} [{p.get('status')}] input: {_short(p.get('input') or p.get('input_text'))}"]
    if p.get("output_text") is not None:
        lines.append(_indent(_short(p["output_text"], 2000), "    → "))
    if p.get("error"):
        err = p["error"]
        lines.append(_indent(_short(err.get("message") if isinstance(err, dict) else err), "    ✗ "))
    return lines
