"""The Redis key names and pub/sub channels of the service (plain strings; producers and
tools import them without redis-py).

Redis keys (``{m}`` is the model name, which is also the Redis Cluster hash tag)::

    featurebudget:{m}:examples    the model's log: a Redis stream any producer may XADD to
    featurebudget:{m}:deadletter  malformed log entries, with the reason
    featurebudget:{m}:snapshot    the latest snapshot (state + id of the last applied entry)
    featurebudget:{m}:lease       which process folds the log into the learner
    featurebudget:{m}:heartbeat   "<time> <process>" of the folding process's last lease renewal
    featurebudget:{m}:applied     id of the last applied entry (for ?wait=true elsewhere)
    featurebudget:{m}:view        hash: the serving view (``state``) every API process answers
                                  from, and its ``token`` ("<log id> <nonce>")
    featurebudget:{m}:idempotency hash: Idempotency-Key -> the log ids its request appended
                                  (and idempotency_times: when, to expire old keys)
    featurebudget:{m}:artifacts   batch models: hash version -> metadata (JSON)
    featurebudget:{m}:artifact:V  batch models: the fitted model of version V (safe format)
    featurebudget:{m}:version     batch models: the version every API process serves
    featurebudget:{m}:version_seq batch models: the last version number handed out
    featurebudget:{m}:jobs        batch models: hash job id -> retrain job record (JSON)
    featurebudget:{m}:status      batch models: the fold's counters (JSON), for every process
    featurebudget:{m}:spec        Redis Cluster only: the model config (JSON); the model
                                  exists iff this key does (see service.storage.redis)
    featurebudget:models          hash: model name -> model config (JSON); on a cluster an
                                  index listing every model (and names of none)
    featurebudget:members:<role>  hash: live process -> "<joined> <expires>" (service.placement)
    featurebudget:versions        pub/sub channel: "<model> <version>" on every publish
    featurebudget:jobs            pub/sub channel: "<model>" when a retrain job is queued
"""

from __future__ import annotations

KEY_PREFIX = "featurebudget"
MODELS_KEY = f"{KEY_PREFIX}:models"
VERSIONS_CHANNEL = f"{KEY_PREFIX}:versions"
JOBS_CHANNEL = f"{KEY_PREFIX}:jobs"
MODELS_CHANNEL = f"{KEY_PREFIX}:models-changed"  # a model created or deleted
SNAPSHOTS_CHANNEL = f"{KEY_PREFIX}:snapshot-requests"  # write a snapshot now
CONSUMER_GROUP = "featurebudget-learners"


def log_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:examples"


def deadletter_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:deadletter"


def snapshot_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:snapshot"


def lease_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:lease"


def applied_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:applied"


def members_key(role: str) -> str:
    return f"{KEY_PREFIX}:members:{role}"


def view_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:view"


def heartbeat_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:heartbeat"


def artifacts_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:artifacts"


def artifact_key(model: str, version: int) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:artifact:{int(version)}"


def version_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:version"


def version_seq_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:version_seq"


def jobs_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:jobs"


def status_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:status"


def cancels_key(model: str) -> str:
    """Job id -> when its cancellation was requested (``DELETE /jobs/{id}``)."""
    return f"{KEY_PREFIX}:{{{model}}}:cancels"


def chunk_prefix(model: str) -> str:
    """Prefix of the chunks of a model's large values (``<prefix><chunk id>:<k>``)."""
    return f"{KEY_PREFIX}:{{{model}}}:chunk:"


def chunk_key(model: str, chunk_id: str, k: int) -> str:
    return f"{chunk_prefix(model)}{chunk_id}:{int(k)}"


def requested_sets_key(model: str) -> str:
    """Process id -> its counts of the computed sets ``/predict`` asked for (JSON)."""
    return f"{KEY_PREFIX}:{{{model}}}:requested_sets"


def model_keys(model: str) -> list[str]:
    """Every fixed key of one model (artifact blobs are listed in ``artifacts_key``; chunks of
    large values in the snapshot's ``chunks`` field and in chunked artifact values)."""
    return [log_key(model), snapshot_key(model), deadletter_key(model), applied_key(model),
            lease_key(model), artifacts_key(model), version_key(model),
            version_seq_key(model), jobs_key(model), status_key(model),
            idempotency_key(model), idempotency_times_key(model), heartbeat_key(model),
            view_key(model), cancels_key(model), requested_sets_key(model)]


def spec_key(model: str) -> str:
    """Redis Cluster only: the model's config, in the model's slot (whether it exists)."""
    return f"{KEY_PREFIX}:{{{model}}}:spec"


def idempotency_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:idempotency"


def idempotency_times_key(model: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:idempotency_times"


def pending_key(model: str, prediction_id: str) -> str:
    return f"{KEY_PREFIX}:{{{model}}}:prediction:{prediction_id}"
