"""The Grafana dashboard queries only metrics the service exports, and every metric the
service exports has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import service.metrics  # noqa: F401 - registers the metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docker/grafana/dashboards/featurebudget.json"


def exported_names() -> set[str]:
    names = set()
    for collector in list(REGISTRY._collector_to_names):
        for metric in collector.describe() if hasattr(collector, "describe") else []:
            if metric.name.startswith("featurebudget_"):
                names.add(metric.name)
    return names


def test_dashboard_queries_exported_metrics_and_covers_them():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    used = set()
    for panel in panels:
        for target in panel.get("targets", []):  # (row panels have none)
            used |= set(re.findall(r"featurebudget_[a-z_]+", target["expr"]))
    base = {re.sub(r"_(bucket|sum|count|total)$", "", name) for name in used}
    exported = exported_names()
    assert base <= exported, base - exported
    assert exported <= base, f"metrics without a panel: {sorted(exported - base)}"
