"""An online model's learner from its spec: the checks of its construction, the learner, and
the feature hasher of a hashed model.

Every check runs on the declared parameters alone, before anything of the model's size is
allocated (O(1) in the dimension; O(parameters) for the names).
"""

from __future__ import annotations

import contextlib

from algorithms.online import LEARNERS
from service.errors import item_error
from service.schemas import ModelCreate


def check_learner(spec: ModelCreate, max_bytes: int | None = None) -> int:
    """Every check the construction of ``spec``'s learner makes, from the parameters alone
    (nothing of the model's size is allocated): the state's size in bytes, or InputError
    naming the field. With ``max_bytes`` a larger state is refused (a dense learner over
    2^31 features would need 34 GB). O(1)."""
    cls = LEARNERS.get(spec.algorithm)
    if cls is None:
        raise item_error(f"unknown algorithm {spec.algorithm!r}; known: {sorted(LEARNERS)}",
                         field="algorithm")
    if spec.budget is not None and not cls.selects:
        selecting = sorted(name for name, c in LEARNERS.items() if c.selects)
        raise item_error(f"{spec.algorithm} keeps every feature: budget is for the learners "
                         f"that select ({', '.join(selecting)})", field="budget")
    if max_bytes is not None:
        needed = cls.memory_bytes(n_features=spec.dimension, budget=spec.budget)
        if needed > max_bytes:
            field = "hash_bits" if spec.hash_bits is not None else "n_features"
            raise item_error(f"{spec.algorithm} over {spec.dimension} features needs "
                             f"{needed:,} bytes of state, more than the limit of "
                             f"{max_bytes:,} (FEATUREBUDGET_MAX_MODEL_BYTES)", field=field)
    check_param_names(spec.algorithm, cls, spec.params)
    with _as_input_error(spec):
        return cls.check_arguments(spec.dimension, budget=spec.budget, **spec.params)


_MODEL_FIELDS = ("n_features", "budget")  # the learner's arguments the model's fields give


def check_param_names(algorithm: str, cls, params: dict) -> None:
    """InputError naming the first of ``params`` that ``cls`` does not take: a field of the
    model given as a parameter (``budget``, ``n_features``), or an unknown name (the known
    ones listed, as batch models list theirs). O(parameters)."""
    for name in _MODEL_FIELDS:
        if name in params:
            raise item_error(f"{name} is a field of the model, not a parameter of "
                             f"{algorithm}: give it beside params, as \"{name}\": ...",
                             field=f"params.{name}")
    known = [name for name in cls._get_param_names() if name not in _MODEL_FIELDS]
    unknown = sorted(set(params) - set(known) - set(getattr(cls, "_renamed", {})))
    if unknown:
        raise item_error(f"unknown parameters {unknown} for {algorithm}; known: {known}",
                         field=f"params.{unknown[0]}")


def new_learner(spec: ModelCreate, max_bytes: int | None = None):
    """Construct the learner a spec describes (checked first: :func:`check_learner`);
    InputError naming the field otherwise."""
    check_learner(spec, max_bytes)
    with _as_input_error(spec):
        return LEARNERS[spec.algorithm](n_features=spec.dimension, budget=spec.budget,
                                        **spec.params)


@contextlib.contextmanager
def _as_input_error(spec: ModelCreate):
    """A learner's TypeError / ValueError as the InputError of the field it is about."""
    try:
        yield
    except TypeError as exc:
        raise item_error(f"{spec.algorithm}: {exc}", field="params") from exc
    except ValueError as exc:
        message = str(exc)
        field = "budget" if "budget" in message else "params"
        raise item_error(message, field=field) from exc


def make_hasher(bits: int | None):
    """``(namespace, name) -> index`` for hashed models (MurmurHash3, 2**bits): a
    :class:`~algorithms.sparse.hashing.FeatureHasher`, which also hashes many names of a
    namespace at once (``indices``)."""
    if bits is None:
        return None
    from algorithms.sparse.hashing import FeatureHasher

    return FeatureHasher(bits)
