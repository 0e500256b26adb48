"""Every Prometheus metric of the service, in one place.

With several uvicorn workers, ``featurebudget serve`` sets ``PROMETHEUS_MULTIPROC_DIR``
before the workers start; ``/metrics`` then aggregates all processes' files
(:func:`render`). Gauges use a multiprocess mode that makes the aggregate meaningful.
"""

from __future__ import annotations

import contextlib
import os
import weakref

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# no ``*_created`` family beside every counter and histogram: a series per model and label
# set that no panel or alert reads (multiprocess mode never exported them)
disable_created_metrics()

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
    "Examples rejected as invalid: every example of a rejected request (api) or stream "
    "entry (stream), as far as the body says how many", ["model", "source"])
REQUESTS_REJECTED = Counter(
    "featurebudget_rejected_requests_total",
    "Requests to /examples (api) or stream entries (stream) rejected as invalid",
    ["model", "source"])
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
    "featurebudget_selected_features",
    "Non-zero weights of an online learner; features in the groups a batch model's served "
    "version selected", ["model"], multiprocess_mode="max")
EXAMPLES_SEEN = Gauge(
    "featurebudget_model_examples", "Examples the learner has seen", ["model"],
    multiprocess_mode="max")
RETRAINS = Counter(
    "featurebudget_retrains_total", "Retrain jobs of batch models by outcome",
    ["model", "algorithm", "outcome"])
RETRAIN_SECONDS = Histogram(
    "featurebudget_retrain_seconds", "Duration of one retrain job (fit and publish)", ["model"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0))
READ_STALENESS = Histogram(
    "featurebudget_read_staleness_seconds",
    "Seconds from the folding process applying a micro-batch to another API process "
    "serving it (observed when that process installs the serving view)", ["model"],
    buckets=_LATENCY_BUCKETS)
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


MODEL_INFO = Gauge(
    "featurebudget_model_info",
    "1 for each model this process knows, with its kind (online, or batch: budgeted "
    "predictions) and algorithm; join on model to split any metric by kind",
    ["model", "kind", "algorithm"], multiprocess_mode="max")

ORPHAN_STREAMS = Gauge(
    "featurebudget_orphan_streams",
    "Log streams on Redis with no model to read them (a producer writing to a misspelled or "
    "deleted model's name); /readyz lists them", multiprocess_mode="max")

HTTP_REQUESTS = Counter(
    "featurebudget_http_requests_total",
    "HTTP requests answered, by route template (unmatched: no route), method and status "
    "class (2xx, 4xx, 5xx)", ["route", "method", "status"])
HTTP_BUCKETS = _LATENCY_BUCKETS
HTTP_SECONDS = Histogram(
    "featurebudget_http_request_seconds",
    "Time to answer one HTTP request, to its last byte, by route template and method",
    ["route", "method"], buckets=HTTP_BUCKETS)
READY = Gauge(
    "featurebudget_ready",
    "1 while this API process is ready (what /readyz answers, checked every few seconds); "
    "0 when starting, degraded or its storage is unreachable (the lowest over the processes)",
    ["backend"], multiprocess_mode="livemin")

# Every metric whose first label is the model, for forget_model.
_PER_MODEL = (EXAMPLES_INGESTED, EXAMPLES_REPEATED, EXAMPLES_APPLIED, EXAMPLES_REJECTED,
              REQUESTS_REJECTED,
              DEADLETTER_ENTRIES, UPDATE_SECONDS, PREDICT_SECONDS, PREDICTIONS, FEEDBACK,
              SNAPSHOTS, SNAPSHOTS_REFUSED, SNAPSHOT_SECONDS, LEARNER_LAG,
              PROGRESSIVE_ACCURACY, SELECTED_FEATURES, EXAMPLES_SEEN, RETRAINS, RETRAIN_SECONDS,
              READ_STALENESS, MODEL_VERSION, STATISTICS_EXAMPLES, WINDOW_EXAMPLES, MODEL_INFO)
FORMATS = ("json", "libsvm", "bin")  # the ``format`` of examples ingested through the API
FEEDBACK_OUTCOMES = ("correct", "wrong", "unknown")
RETRAIN_OUTCOMES = ("succeeded", "failed", "cancelled")
REJECTION_SOURCES = ("api", "stream")


def init_model(spec) -> None:
    """Give a model's labelled counters and histograms their series at 0 as soon as the
    process knows the model (created, restored or followed from another process).

    A counter that was never incremented has no series: a panel then shows "no data"
    instead of 0, and ``increase()`` misses its first increment (an alert on the first
    refused snapshot or failed retrain would never fire). ``spec``: a ``ModelSpec``.
    ``featurebudget_read_staleness_seconds`` is left out: it is observed only where a model
    that another process folds is served, from the first view installed there.
    """
    name, batch = spec.name, spec.is_batch
    MODEL_INFO.labels(name, "batch" if batch else "online", spec.algorithm).set(1)
    for fmt in FORMATS if batch else (*FORMATS, "feedback"):
        EXAMPLES_INGESTED.labels(name, fmt)
    for source in REJECTION_SOURCES:
        EXAMPLES_REJECTED.labels(name, source)
        REQUESTS_REJECTED.labels(name, source)
    for metric in (EXAMPLES_REPEATED, EXAMPLES_APPLIED, DEADLETTER_ENTRIES, PREDICTIONS,
                   SNAPSHOTS, SNAPSHOTS_REFUSED, UPDATE_SECONDS, PREDICT_SECONDS,
                   SNAPSHOT_SECONDS):
        metric.labels(name)
    if batch:
        for outcome in RETRAIN_OUTCOMES:
            RETRAINS.labels(name, spec.algorithm, outcome)
        RETRAIN_SECONDS.labels(name)
    else:
        for outcome in FEEDBACK_OUTCOMES:
            FEEDBACK.labels(name, outcome)


def count_rejected(model: str, source: str, examples: int) -> None:
    """One rejected request or stream entry (``source``: api, stream) and its examples."""
    REQUESTS_REJECTED.labels(model, source).inc()
    if examples:
        EXAMPLES_REJECTED.labels(model, source).inc(examples)


def observe_many(child, buckets: list[int], seconds: float) -> None:
    """Add observations counted elsewhere to a histogram's labelled ``child``: ``buckets``
    holds how many fell in each bucket (not cumulative; the last above every bound),
    ``seconds`` their sum. O(buckets)."""
    for value, n in zip(child._buckets, buckets, strict=True):
        if n:
            value.inc(n)
    child._sum.inc(seconds)


_BEFORE_RENDER: list[weakref.WeakMethod] = []


def before_render(method) -> None:
    """Call the bound ``method`` before each :func:`render` of this process (while its
    object lives): a tally kept outside the metrics moves into them."""
    _BEFORE_RENDER.append(weakref.WeakMethod(method))


def forget_model(model: str) -> None:
    """Drop a deleted model's labelled series (single-process registry only: with several
    workers their values live in files that prometheus_client cannot remove from)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    for metric in _PER_MODEL:
        for labels in list(metric._metrics):
            if labels and labels[0] == model:
                with contextlib.suppress(KeyError):
                    metric.remove(*labels)


def render() -> tuple[bytes, str]:
    """The exposition text: this process, or all workers in multiprocess mode."""
    _BEFORE_RENDER[:] = [ref for ref in _BEFORE_RENDER if ref() is not None]
    for ref in _BEFORE_RENDER:
        method = ref()
        if method is not None:
            method()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
