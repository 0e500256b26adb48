"""Every Prometheus metric of the service, in one place (DESIGN §5).

With several uvicorn workers, ``featurebudget serve`` sets ``PROMETHEUS_MULTIPROC_DIR``
before the workers start; ``/metrics`` then aggregates all processes' files
(:func:`render`). Gauges use a multiprocess mode that makes the aggregate meaningful.
"""

from __future__ import annotations

import contextlib
import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0)

EXAMPLES_INGESTED = Counter(
    "featurebudget_examples_ingested_total",
    "Examples appended to a model's log through the API", ["model", "format"])
EXAMPLES_REPEATED = Counter(
    "featurebudget_examples_repeated_total",
    "Examples of retried requests (an Idempotency-Key seen before): not appended again",
    ["model"])
EXAMPLES_APPLIED = Counter(
    "featurebudget_examples_applied_total", "Examples folded into a learner", ["model"])
EXAMPLES_REJECTED = Counter(
    "featurebudget_examples_rejected_total",
    "Requests or stream entries rejected as invalid", ["model", "source"])
DEADLETTER_ENTRIES = Counter(
    "featurebudget_deadletter_entries_total",
    "Malformed log entries sent to the dead-letter stream", ["model"])
UPDATE_SECONDS = Histogram(
    "featurebudget_update_seconds", "Time to apply one micro-batch", ["model"],
    buckets=_LATENCY_BUCKETS)
PREDICT_SECONDS = Histogram(
    "featurebudget_predict_seconds", "Time to score one predict request", ["model"],
    buckets=_LATENCY_BUCKETS)
PREDICTIONS = Counter(
    "featurebudget_predictions_total", "Examples scored by /predict", ["model"])
FEEDBACK = Counter(
    "featurebudget_feedback_total", "Feedback labels received", ["model", "outcome"])
SNAPSHOTS = Counter(
    "featurebudget_snapshots_total", "Snapshots written", ["model"])
SNAPSHOTS_REFUSED = Counter(
    "featurebudget_snapshots_refused_total",
    "Snapshot writes refused because this process no longer held the model's lease", ["model"])
SNAPSHOT_SECONDS = Histogram(
    "featurebudget_snapshot_seconds", "Time to write one snapshot", ["model"],
    buckets=_LATENCY_BUCKETS)
LEARNER_LAG = Gauge(
    "featurebudget_learner_lag_seconds",
    "Age of the newest applied entry when it was applied (Redis ids carry time)", ["model"],
    multiprocess_mode="max")
PROGRESSIVE_ACCURACY = Gauge(
    "featurebudget_progressive_accuracy_ratio",
    "Test-then-train accuracy over all examples applied", ["model"],
    multiprocess_mode="max")
SELECTED_FEATURES = Gauge(
    "featurebudget_selected_features", "Non-zero weights of the learner", ["model"],
    multiprocess_mode="max")
EXAMPLES_SEEN = Gauge(
    "featurebudget_model_examples", "Examples the learner has seen", ["model"],
    multiprocess_mode="max")
RETRAINS = Counter(
    "featurebudget_retrains_total", "Retrain jobs of batch models by outcome",
    ["model", "algorithm", "outcome"])
RETRAIN_SECONDS = Histogram(
    "featurebudget_retrain_seconds", "Duration of one retrain job (fit and publish)", ["model"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0))
MODEL_VERSION = Gauge(
    "featurebudget_model_version", "Version of a batch model this process serves (API) or "
    "last published (worker)", ["model"], multiprocess_mode="max")
STATISTICS_EXAMPLES = Gauge(
    "featurebudget_statistics_examples",
    "Examples in an anytime model's sufficient statistics (training + validation)", ["model"],
    multiprocess_mode="max")
WINDOW_EXAMPLES = Gauge(
    "featurebudget_window_examples",
    "Examples in a gbfs / nvsd model's training and validation windows", ["model"],
    multiprocess_mode="max")


def forget_model(model: str) -> None:
    """Drop a deleted model's labelled series (single-process registry only)."""
    for metric in (EXAMPLES_APPLIED, UPDATE_SECONDS, PREDICT_SECONDS, PREDICTIONS, SNAPSHOTS,
                   SNAPSHOTS_REFUSED, SNAPSHOT_SECONDS, LEARNER_LAG, PROGRESSIVE_ACCURACY,
                   SELECTED_FEATURES, EXAMPLES_SEEN, DEADLETTER_ENTRIES, RETRAIN_SECONDS,
                   MODEL_VERSION, STATISTICS_EXAMPLES, WINDOW_EXAMPLES):
        with contextlib.suppress(KeyError):
            metric.remove(model)
    for labels in list(RETRAINS._metrics):
        if labels and labels[0] == model:
            with contextlib.suppress(KeyError):
                RETRAINS.remove(*labels)


def render() -> tuple[bytes, str]:
    """The exposition text: this process, or all workers in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
