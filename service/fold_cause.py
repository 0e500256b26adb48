"""Why a model's log is not being folded on a shared backend, in a sentence for a 504 or a
warning: the folding process's heartbeat (:meth:`~service.storage.base.Storage.heartbeats`,
as ``/readyz`` reads it) and the live batch workers (placement's ``batch`` members). Two
round trips; O(members)."""

from __future__ import annotations

NO_WORKER = ("no `featurebudget worker` is running on this backend: batch models' examples "
             "are not folded and their retrains do not run until one starts "
             "(`featurebudget worker --redis-url ...`)")


async def batch_workers(storage, settings) -> list[str]:
    """The live batch workers (processes of the ``batch`` role) of a shared backend."""
    return await storage.live_members("batch", settings.lease_seconds)


async def fold_cause(storage, settings, name: str, kind: str) -> str | None:
    """Why no process folds ``name`` now, or None when one does (or the backend is not
    shared: this process folds every model)."""
    if not storage.shared:
        return None
    lease = settings.lease_seconds
    beat = (await storage.heartbeats([name])).get(name)
    if beat is not None:
        age, owner = beat
        if age <= lease * 2 / 3:  # renewed every lease / 3
            return None
        return (f"process {owner}, which folded model {name!r}, stopped renewing its lease "
                f"{age:.0f} s ago; another takes over within {max(0.0, lease - age):.0f} s")
    if kind == "batch":
        if not await batch_workers(storage, settings):
            return (f"no batch worker has folded model {name!r}: start `featurebudget worker` "
                    "on this backend (`featurebudget worker --redis-url ...`)")
        return (f"no batch worker has taken model {name!r} yet (one does within "
                f"{lease:.0f} s of its creation)")
    return f"no API process has taken model {name!r} yet"


async def not_applied(storage, settings, name: str, kind: str, log_id: str,
                      timeout: float) -> str:
    """The 504 of a ``?wait=true`` that timed out: what was not applied, and why."""
    cause = await fold_cause(storage, settings, name, kind)
    head = (f"entries up to {log_id} were not applied within {timeout:g} s; they are in the "
            "log and are applied in order once the model is folded")
    if cause is None:
        return (f"{head}: its fold is behind (GET /v1/models/{name} shows its log_position "
                "and log_end)")
    return f"{head}: {cause}"
