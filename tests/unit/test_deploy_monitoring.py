"""deploy/grafana-dashboard.json and deploy/prometheus-alerts.yml load in their tools and only name metrics
the bridge really exports: `promtool check rules` / `promtool test rules` (Debian package `prometheus`),
every dashboard query parsed by promtool too, and the dashboard's structure checked here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import bridge.fanout.metrics  # noqa: F401  (registers the fan-out metrics on the shared registry)
from bridge.metrics import REGISTRY
from bridge.workers.set_state import metrics_text, snapshot

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana-dashboard.json"
ALERTS = REPO / "deploy" / "prometheus-alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus-alerts.test.yml"
METRIC = re.compile(r"\bbridge_[a-z0-9_]+\b")
# What an operator must see (ingest, lag, rejects, warm sessions, WebSocket clients, drops, lease changes).
MUST_SHOW = {
    "bridge_events_ingested_total", "bridge_upstream_to_commit_seconds_bucket", "bridge_rejects_total",
    "bridge_sessions_warm", "bridge_ws_connections", "bridge_ws_deltas_dropped_total", "bridge_lease_claims_total",
    "bridge_lease_losses_total", "bridge_ready",
}
MUST_ALERT = {"bridge_upstream_to_commit_seconds_bucket", "bridge_rejects_total", "bridge_ready",
              "bridge_lease_claims_total", "bridge_session_status_total"}


def _exported_series() -> set[str]:
    """Every series name the registry can export (labelled metrics count before their first sample)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",),
                "summary": ("_sum", "_count", "")}
    registry = {m.name + s for m in REGISTRY.collect() for s in suffixes.get(m.type, ("",))}
    # a worker of a set adds its set's series (bridge.workers.set_state), read from the parent's state
    worker_set = snapshot(2, {0: True}, {}, {0: 1}, {1: 1}, stopping=False, tick_s=5.0, now=0.0)
    return registry | {s.name for f in text_string_to_metric_families(metrics_text(worker_set, 1.0))
                       for s in f.samples}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    reason = "promtool not installed (make promtool: apt-get install -y prometheus)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def _exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p["targets"]]


def test_every_metric_the_dashboard_and_alerts_name_is_exported_by_the_bridge() -> None:
    exported = _exported_series()
    in_dashboard = {m for e in _exprs() for m in METRIC.findall(e)}
    in_alerts = set(METRIC.findall("\n".join(
        line for line in ALERTS.read_text().splitlines() if not line.lstrip().startswith(("#", "description"))
    )))
    assert in_dashboard - exported == set()
    assert in_alerts - exported == set()
    assert in_dashboard >= MUST_SHOW
    assert in_alerts >= MUST_ALERT


def test_the_dashboard_is_a_well_formed_grafana_dashboard() -> None:
    doc = _dashboard()
    assert doc["uid"] == "opencode-bridge" and isinstance(doc["schemaVersion"], int)
    variables = {v["name"] for v in doc["templating"]["list"]}
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 10
    cells: set[tuple[int, int]] = set()
    for p in doc["panels"]:
        assert p["type"] in {"stat", "timeseries"} and p["title"] and p["description"]
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
        assert p["datasource"]["uid"].strip("${}") in variables
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["expr"].strip() and METRIC.search(t["expr"]), t


def test_the_alert_rules_pass_promtool_check_rules() -> None:
    out = subprocess.run([_promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_each_alert_fires_when_it_should_and_not_otherwise_promtool_test_rules() -> None:
    out = subprocess.run([_promtool(), "test", "rules", ALERT_TESTS.name], cwd=ALERT_TESTS.parent,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    tested = set(re.findall(r"alertname: (\w+)", ALERT_TESTS.read_text()))
    defined = set(re.findall(r"- alert: (\w+)", ALERTS.read_text()))
    assert defined - tested <= {"BridgeWatchdogWithheld", "BridgeSlowWebSocketClients"}


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    # promtool parses rule expressions with Prometheus' own parser: wrap each panel query in a recording rule.
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(_exprs()):
        promql = expr.replace("$__rate_interval", "5m")
        rules += [f"      - record: dashboard:query_{i}", f"        expr: {json.dumps(promql)}"]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text("\n".join(rules) + "\n")
    out = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_exprs())} rules found" in out.stdout
