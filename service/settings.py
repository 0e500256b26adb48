"""Service settings, from the environment (prefix ``FEATUREBUDGET_``) or arguments."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from service.storage.redis_writes import RedisWriteSettings


class Settings(RedisWriteSettings):
    """All knobs of the service; ``FEATUREBUDGET_<NAME>`` sets each one (the Redis write
    acknowledgement, ``REDIS_MIN_REPLICAS`` and ``REDIS_WAIT_TIMEOUT_MS``, in
    :class:`RedisWriteSettings`)."""

    # hide_input_in_errors: a refused setting is named, never echoed (API keys, passwords)
    model_config = SettingsConfigDict(env_prefix="FEATUREBUDGET_", extra="ignore",
                                      hide_input_in_errors=True)

    storage_url: str | None = Field(
        default=None, validation_alias=AliasChoices(
            "storage_url", "redis_url", "FEATUREBUDGET_STORAGE_URL", "FEATUREBUDGET_REDIS_URL"),
        description="where the service keeps its state, by scheme (service/storage/schemes.py): "
        "file://<dir> (embedded: files in <dir>), redis://host:6379/0 / rediss:// / unix:// "
        "(one Redis server), redis+cluster://host:port[,host:port...]/ (a Redis Cluster), "
        "redis+sentinel://host:port[,host:port...]/<master-name>[/<db>] (Redis Sentinels and "
        "the master they watch: the service follows a failover); FEATUREBUDGET_REDIS_URL is "
        "an alias; unset = file://<DATA_DIR>")
    data_dir: Path = Field(default=Path("./data"), description="embedded backend directory")
    fsync: bool = Field(default=False, description="fsync the local log on every append")
    log_segment_bytes: int = 64 << 20
    api_keys: str = Field(default="", description="comma-separated; 'key:read' = predict "
                          "only, 'key' or 'key:write' = everything; any other role, an empty "
                          "key or a key given twice stops the service at start-up")
    metrics_key_required: bool = Field(
        default=False, description="/metrics (every model's name in its labels) answers "
        "only a request with one of API_KEYS, of either role (401 otherwise); needs API_KEYS. "
        "Default: open")
    max_body_bytes: int = 32 << 20
    max_model_bytes: int = Field(
        default=4 << 30, description="refuse models whose learner state would be larger; a "
        "batch model: its fold state, snapshot (stored and while written), fit peak, served "
        "version and kept versions together (service/batch/spec.py estimate_sizes)")
    max_fit_seconds: float = Field(
        default=600.0, gt=0, description="refuse batch models (422) and retrains (409) whose "
        "retrain would take longer by the estimate from their sizes (examples x features x "
        "trees / path length); a fit still running after this long is stopped at its next "
        "progress step and fails")
    redis_chunk_bytes: int = Field(
        default=4 << 20, ge=1 << 10, le=256 << 20, description="Redis: snapshots and versions "
        "larger than this are written and read in chunks of this size (several keys, "
        "committed as one value by the fenced script), each command with a socket timeout of "
        "5 s + its size at 8 MiB/s")
    max_total_model_bytes: int | None = Field(
        default=None, description="budget for the state of all models of one process "
        "together (every API process holds every model); unset = half the machine's memory")
    microbatch_max_entries: int = 16
    answer_threads: int | None = Field(
        default=None, ge=1, description="threads that compute budgeted answers (batch "
        "models' /predict and /next, off the event loop); unset = the cores")
    answer_queue: int = Field(default=64, ge=0, description="budgeted answers that may wait "
                              "for a thread; one more gets 503 with Retry-After")
    batch_read_max_entries: int = 512  # a batch fold's read, folded as one block (fewer
    # when entries are big: at most microbatch_max_bytes; service/batch/worker/fold_state.py)
    microbatch_max_bytes: int = 8 << 20  # fewer entries per read when entries are big (and
    # smaller units of background work: predictions wait less; load_tests/predict_latency.py)
    apply_chunk_examples: int = 256  # rows per kernel call (bounds event-loop stalls)
    consumer_block_ms: int = 200
    prefetch: bool = True  # read the next micro-batch while one is applied
    malloc_retain_bytes: int = 64 << 20  # glibc heap kept for reuse (0 = its defaults)
    snapshot_every_examples: int = 100_000
    snapshot_every_seconds: float = 60.0
    trim_log: bool = True
    prediction_ttl_seconds: float = 3600.0
    wait_timeout_seconds: float = 60.0
    idempotency_retention_seconds: float = 86_400.0  # how long an Idempotency-Key is kept
    autoclaim_idle_ms: int = 30_000
    deadletter_maxlen: int = 10_000
    lease_seconds: float = 10.0
    background_nice: int = Field(
        default=10, ge=0, le=19, description="how many steps below the event loop's the CPU "
        "priority of ingestion threads (parsing, applying, log writes, fits) is: predictions "
        "first")
    gil_switch_interval_ms: float = Field(
        default=0.5, gt=0, le=100, description="the interpreter's GIL switch interval: how "
        "long the event loop may wait for the GIL while a background thread runs Python code")
    serving_view_bytes_per_second: float = Field(
        default=32e6, gt=0, description="bound on the serving views an online model's folding "
        "process publishes (read-your-writes across API processes): a view of V bytes is "
        "followed by the next one no sooner than V / this")
    feature_names_max: int = 100_000
    selected_features_max: int = 1000
    batch_worker: bool | None = Field(
        default=None, description="fold batch models and run their retrains in this API "
        "process; unset = yes on the embedded backend, no on Redis (run `featurebudget "
        "worker`)")
    job_poll_seconds: float = 0.25  # how often a batch fold looks for queued retrain jobs
    job_progress_seconds: float = 0.5  # how often a running job's progress is stored
    versions_kept: int = 10  # newest artifact versions kept per batch model (and the current)
    version_check_seconds: float = 1.0  # API processes re-read current versions this often
    metrics_host: str = Field(default="127.0.0.1", description="address `featurebudget "
                              "worker` serves its Prometheus metrics on (0.0.0.0: every one)")

    @field_validator("api_keys")
    @classmethod
    def _api_keys(cls, value: str) -> str:
        parse_api_keys(value)  # a typo in a role must not make a write key: refuse to start
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_storage_url(cls, data):
        """Both the setting and its alias in the environment must agree."""
        given = os.environ.get("FEATUREBUDGET_STORAGE_URL")
        alias = os.environ.get("FEATUREBUDGET_REDIS_URL")
        if (given and alias and given != alias and isinstance(data, dict)
                and data.get("storage_url") in (given, alias)):
            raise ValueError("FEATUREBUDGET_STORAGE_URL and its alias FEATUREBUDGET_REDIS_URL "
                             "name different storages: set one")
        return data

    @field_validator("storage_url")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        if value:  # an unknown scheme or a malformed cluster or sentinel URL fails at startup
            from service.storage import schemes

            schemes.check(value)
        return value

    @model_validator(mode="after")
    def _metrics_key_needs_keys(self) -> Settings:
        if self.metrics_key_required and not self.key_roles():
            raise ValueError("FEATUREBUDGET_METRICS_KEY_REQUIRED needs FEATUREBUDGET_API_KEYS "
                             "(with no keys every request is open)")
        return self

    @model_validator(mode="after")
    def _file_url_sets_data_dir(self) -> Settings:
        """``file://<dir>`` is the embedded backend in ``<dir>``: DATA_DIR follows it."""
        if self.storage_url and self.storage_url.lower().startswith("file://"):
            from service.storage import schemes

            path = schemes.file_path(self.storage_url)
            if "data_dir" in self.model_fields_set and Path(self.data_dir) != path:
                raise ValueError(f"FEATUREBUDGET_STORAGE_URL names {path} and "
                                 f"FEATUREBUDGET_DATA_DIR {self.data_dir}: set one")
            self.data_dir = path
        return self

    @property
    def storage_location(self) -> str:
        """The storage URL in effect: STORAGE_URL (or its alias REDIS_URL), else
        ``file://<DATA_DIR>``."""
        return self.storage_url or f"file://{self.data_dir}"

    @property
    def redis_url(self) -> str | None:
        """The storage URL when it names Redis (one server, a cluster, sentinels), else None."""
        from service.storage import schemes

        return self.storage_url if schemes.is_redis(self.storage_url) else None

    def total_model_budget(self) -> int:
        if self.max_total_model_bytes is not None:
            return self.max_total_model_bytes
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            physical = 16 << 30
        return physical // 2

    def key_roles(self) -> dict[str, str]:
        """API key -> 'write' or 'read'. Empty when no keys are configured (open)."""
        return parse_api_keys(self.api_keys)


READ_ROLES = ("read", "ro", "readonly")
WRITE_ROLES = ("", "write")  # no role: a write key


def parse_api_keys(value: str) -> dict[str, str]:
    """``FEATUREBUDGET_API_KEYS`` -> {key: 'write' | 'read'}; ValueError naming the entry by
    its position (never the key) for a role that is neither, an empty key, or a key given
    twice."""
    roles: dict[str, str] = {}
    for position, raw in enumerate(value.split(","), start=1):
        raw = raw.strip()
        if not raw:
            continue
        key, _, role = raw.partition(":")
        key, role = key.strip(), role.strip().lower()
        where = f"FEATUREBUDGET_API_KEYS entry {position}"
        if not key:
            raise ValueError(f"{where} has no key before its ':'")
        if role in READ_ROLES:
            kind = "read"
        elif role in WRITE_ROLES:
            kind = "write"
        else:  # (a role that could be part of a key with a ':' in it is not echoed)
            shown = f"the role {role!r}" if role.isalpha() and len(role) <= 16 else \
                "an unknown role"
            raise ValueError(f"{where} has {shown}; a role is 'read' (or 'ro', "
                             "'readonly'), or 'write' (the default: 'key' alone)")
        if key in roles:
            raise ValueError(f"{where} repeats the key of an earlier entry")
        roles[key] = kind
    return roles
