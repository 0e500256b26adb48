"""The alert rules (docker/prometheus/alerts.yml) are valid for Prometheus (`promtool check
rules`) and do what they say on synthetic series (`promtool test rules` on
docker/prometheus/alerts.test.yml): each alert fires when it should and not otherwise, and
the unit tests fail when an alert's condition is broken."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.processes import DOCKER, binary

RULES = DOCKER / "prometheus/alerts.yml"
UNIT_TESTS = DOCKER / "prometheus/alerts.test.yml"
# what the issue asks an alert for, and the metric its expression must read
REQUIRED = {
    "FeaturebudgetLearnerLagHigh": "featurebudget_learner_lag_seconds",
    "FeaturebudgetNotApplying": "featurebudget_examples_applied_total",
    "FeaturebudgetRetrainFailed": "featurebudget_retrains_total",
    "FeaturebudgetSnapshotRefused": "featurebudget_snapshots_refused_total",
    "FeaturebudgetPredictLatencyHigh": "featurebudget_predict_seconds_bucket",
    "FeaturebudgetTargetDown": "up",
    "FeaturebudgetHttp5xx": "featurebudget_http_requests_total",
    "FeaturebudgetDeadLetters": "featurebudget_deadletter_entries_total",
    "FeaturebudgetNotReady": "featurebudget_ready",
}


def alerts() -> dict[str, dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_rules_are_valid_and_cover_what_operators_need():
    result = promtool("check", "rules", str(RULES), cwd=RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in result.stdout
    rules = alerts()
    assert set(REQUIRED) <= set(rules)
    for name, metric in REQUIRED.items():
        assert re.search(rf"\b{metric}\b", rules[name]["expr"]), name
        assert rules[name]["labels"]["severity"] in ("warning", "critical")
        assert {"summary", "description"} <= set(rules[name]["annotations"])
    config = yaml.safe_load((DOCKER / "prometheus/prometheus.yml").read_text())
    assert RULES.name in config["rule_files"]  # Prometheus in compose loads them


def test_unit_tests_fire_and_stay_quiet_for_every_alert():
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=UNIT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    # every alert has a case where it fires and one where it does not
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test.get("alert_rule_test", [])]
    for name in alerts():
        assert any(c["alertname"] == name and c["exp_alerts"] for c in cases), name
        assert any(c["alertname"] == name and not c["exp_alerts"] for c in cases), name


@pytest.mark.parametrize("alert", sorted(REQUIRED))
def test_unit_tests_catch_a_broken_alert(tmp_path, alert):
    """The same unit tests against rules where one alert can never fire: they fail."""
    groups = yaml.safe_load(RULES.read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == alert:
                rule["expr"] = f"({rule['expr']}) and on () vector(0) > 1"
    (tmp_path / RULES.name).write_text(yaml.safe_dump(groups))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert result.returncode != 0
    assert alert in result.stdout + result.stderr
