"""What `bench.churn` makes of its samples: the RSS slope per 1,000 sessions cycled, the summary lines and
the RSS plot (matplotlib, a dev dependency: imported only when a plot is asked for)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any


def rss_slope(samples: list[dict[str, Any]], churn_s: float) -> dict[str, Any]:
    """Least-squares slope of the daemon's RSS (MiB) against sessions cycled, over the samples taken
    after the first third of the churn and before its end; in MiB per 1,000 sessions."""
    tail = [s for s in samples if churn_s / 3 <= s["t"] <= churn_s]
    xs, ys = [s["cycled"] for s in tail], [s["rss_mib"] for s in tail]
    if len(set(xs)) < 2:
        return {"mib_per_1000_sessions": None, "samples": len(tail)}
    fit = statistics.linear_regression(xs, ys)
    return {"mib_per_1000_sessions": fit.slope * 1000, "samples": len(tail), "from_sessions": xs[0],
            "to_sessions": xs[-1], "rss_first_mib": ys[0], "rss_last_mib": ys[-1]}


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "end": values[-1]}


def summary(r: dict[str, Any]) -> str:
    slope = r["rss_slope"]["mib_per_1000_sessions"]
    rss, warm = r["rss_mib"], r["warm_sessions"]
    return "\n".join([
        f"churn: {r['rounds']} rounds every {r['round_s']:g} s over {r['churn_s']:.0f} s: {r['sessions_cycled']} "
        f"sessions created ({r['events_per_new_session']} events each), {r['sessions_picked']} returns of "
        f"{r['extend_events']} events; BRIDGE_IDLE_TTL_S={r['idle_ttl_s']:g}",
        f"events upstream {r['events_upstream']}, stored {r['events_stored']} "
        f"({'drained' if r['drained'] else 'NOT drained'} {r['drain_s']:.1f} s after the last round)",
        f"sync-log calls {r['sync_calls']}, items answered {r['sync_items_answered']} = "
        f"{r['sync_items_per_stored_event']:.2f} per stored event; request bytes per stored event: "
        f"sync log {r['sync_request_bytes_per_stored_event']:.1f}, all {r['request_bytes_per_stored_event']:.1f}; "
        f"response bytes per stored event {r['response_bytes_per_stored_event']:.0f}",
        f"RSS {rss.get('min', 0):.0f}-{rss.get('max', 0):.0f} MiB (end {rss.get('end', 0):.0f}), slope after the "
        f"first third: {'n/a' if slope is None else f'{slope:+.1f}'} MiB per 1,000 sessions cycled",
        f"warm sessions {warm.get('min', 0):.0f}-{warm.get('max', 0):.0f} (median {warm.get('median', 0):.0f}); "
        f"CPU {r['cpu_us_per_event']:.0f} us per stored event ({r['cpu_s']:.1f} s)",
        f"rejects {r['check']['rejects']} (metric {r['rejects_metric']:.0f}), gaps {r['check']['gaps']}, "
        f"sessions differing {r['check']['sessions_differing']}; crashes {r['follower_crashes']:.0f}; "
        f"log {r['daemon_log_problems']}",
        f"claims {r['claims']}, releases {r['releases']}, sync-log metrics {r['sync_metrics']}"])


def plot(r: dict[str, Any], path: Path) -> None:
    """RSS (left axis) and warm sessions (right) over time, the churn's end marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = r["samples"]
    minutes = [s["t"] / 60 for s in samples]
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.plot(minutes, [s["rss_mib"] for s in samples], color="tab:red", label="bridge RSS (MiB)")
    ax.set_xlabel("minutes since the first round")
    ax.set_ylabel("RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.axvline(r["churn_s"] / 60, color="grey", linestyle=":", label="last round")
    ax2 = ax.twinx()
    ax2.plot(minutes, [s["warm"] for s in samples], color="tab:blue", alpha=0.5, label="warm sessions")
    ax2.set_ylabel("warm sessions")
    ax2.set_ylim(bottom=0)
    slope = r["rss_slope"]["mib_per_1000_sessions"]
    ax.set_title(f"{r.get('label') or 'bench.churn'}: {r['sessions_cycled']} sessions cycled, "
                 f"RSS slope {'n/a' if slope is None else f'{slope:+.1f}'} MiB / 1,000 sessions", fontsize=10)
    lines = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
