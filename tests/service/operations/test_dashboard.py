"""The Grafana dashboard queries only metrics the service exports, and every metric the
service exports has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import service.metrics  # noqa: F401 - registers the metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "docker/grafana/dashboards/featurebudget.json"


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


def test_model_variable_filters_every_per_model_query():
    """The dashboard's ``$model`` variable (the models Prometheus knows, several or all)
    narrows every panel that reads a per-model metric."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    model = variables["model"]
    assert model["query"]["query"] == "label_values(featurebudget_model_info, model)"
    assert model["multi"] and model["includeAll"] and model["allValue"] == ".*"
    per_model = set()
    for collector in list(REGISTRY._collector_to_names):
        if "model" in getattr(collector, "_labelnames", ()):
            per_model |= {m.name for m in collector.describe()}
    assert "featurebudget_examples_rejected" in per_model
    checked = 0
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for name, selector in re.findall(r"(featurebudget_[a-z_]+)(\{[^}]*\})?",
                                             target["expr"]):
                if re.sub(r"_(bucket|sum|count|total)$", "", name) in per_model:
                    assert 'model=~"$model"' in selector, (panel["title"], target["expr"])
                    checked += 1
    assert checked >= 30
