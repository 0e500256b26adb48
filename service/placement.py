"""Which process folds which model: leases placed by bounded-load rendezvous hashing.

On a shared backend every process of a role (``online``: the API processes, which fold
online models; ``batch``: the processes that run batch folds) registers itself in
``featurebudget:members:<role>`` with an expiry of ``FEATUREBUDGET_LEASE_SECONDS``, renewed
with the leases. From the live members and the models it knows, every process computes the
same placement:

    for each model, in name order: the member with the highest h(member, model) that
    holds fewer than ⌊M/N⌋ models, or ⌊M/N⌋ while fewer than M mod N members hold one
    more                                             (h: 64-bit BLAKE2b of both names)

so each process folds ⌈M/N⌉ or ⌊M/N⌋ models, and a process joining or leaving moves few
models (rendezvous order; only the load bound moves more). A process acquires a free
lease only for the models placed on it, or for any model whose lease has been free for a
whole renewal period (its placed process is gone or disagrees). An owner that is no longer
the placed one hands the model over (snapshot, then release) once the placed process has
been a member for a whole lease period. A member that missed two renewals counts as gone
(nothing is placed on or handed over to a killed process). A killed owner's models are
taken over within about ``lease_seconds`` (its lease expires) plus one renewal period
(``lease_seconds / 3``).
"""

from __future__ import annotations

import hashlib
import math
import time

from service.storage import Storage


def rank(member: str, model: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{model}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def place(models: list[str], members: list[str]) -> dict[str, str]:
    """Model -> member: bounded-load rendezvous hashing (see the module docstring)."""
    if not members:
        return {}
    low, extra = divmod(len(models), len(members))  # extra members may hold low + 1
    load = dict.fromkeys(members, 0)
    placed = {}
    for model in sorted(models):
        for member in sorted(members, key=lambda m: rank(m, model), reverse=True):
            if load[member] < low or (load[member] == low and extra > 0):
                extra -= load[member] == low
                placed[model] = member
                load[member] += 1
                break
    return placed


class Membership:
    """This process's membership of a role, and the placement it implies."""

    def __init__(self, storage: Storage, settings, role: str, process_id: str,
                 models) -> None:
        self.storage = storage
        self.settings = settings
        self.role = role
        self.process_id = process_id
        self.models = models  # () -> names of the models of this role this process knows
        self.joined = time.time()
        self.members: dict[str, float] = {}  # live member -> joined at
        self.placement: dict[str, str] = {}
        self._last = -math.inf

    async def refresh(self, *, force: bool = False) -> None:
        """Register (every ``lease_seconds / 3``) and recompute the placement."""
        now = time.monotonic()
        if not force and now - self._last < self.settings.lease_seconds / 3:
            return
        self._last = now
        self.members = await self.storage.members(
            self.role, self.process_id, joined=self.joined,
            expires=time.time() + self.settings.lease_seconds)
        self.placement = place(list(self.models()), sorted(self.members))

    def placed(self, model: str) -> str | None:
        return self.placement.get(model)

    def mine(self, model: str) -> bool:
        return self.placement.get(model, self.process_id) == self.process_id

    def hand_over(self, model: str) -> bool:
        """Whether this owner should hand ``model`` to the process it is placed on now:
        placed elsewhere, on a member for at least a whole lease period."""
        other = self.placement.get(model)
        if other is None or other == self.process_id:
            return False
        joined = self.members.get(other)
        return joined is not None and time.time() - joined >= self.settings.lease_seconds

    async def leave(self) -> None:
        await self.storage.leave(self.role, self.process_id)
