"""What a batch model's spec means: its feature layout, the service's own parameters, the
estimator its ``params`` build, and the memory it needs.

A batch model's features are those of its groups, concatenated in the order given: group
``g`` holds the indices ``offsets[g] .. offsets[g + 1] - 1``. ``params`` mixes the
algorithm's keyword arguments with the service's (``validation_fraction``, the retrain policy
``retrain_every_examples`` / ``retrain_every_seconds``, the training ``window`` of gbfs and
nvsd, and nvsd's ``estimator``); :func:`split_params` separates and validates them.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from algorithms.batch import canonical_params
from service.errors import item_error
from service.schemas import ModelCreate

SERVICE_PARAMS = ("validation_fraction", "retrain_every_examples", "retrain_every_seconds",
                  "window", "estimator")
# the estimator's own keywords that the service sets from the spec
_RESERVED = {"anytime": {"groups", "costs", "method"},
             "gbfs": {"loss", "feature_costs", "feature_groups", "group_costs"},
             "nvsd": {"groups", "validation_fraction"},
             "auto": {"groups", "costs", "task"}}
_DEFAULT_POLICY = {"anytime": (10_000, 60.0), "gbfs": (None, None), "nvsd": (None, None),
                   "auto": (None, None)}
_DEFAULT_WINDOW = {"gbfs": 5000, "nvsd": 200, "auto": 5000}


@dataclass(frozen=True)
class Window:
    """The bounded training window of gbfs / nvsd: the newest ``size`` examples, or a
    uniform reservoir of ``size`` over everything folded (seeded, see fold_state)."""

    kind: str
    size: int
    seed: int


@dataclass(frozen=True)
class BatchParams:
    validation_fraction: float
    retrain_every_examples: int | None
    retrain_every_seconds: float | None
    window: Window | None
    estimator: str | None  # nvsd: "relaxed" (default) or "plain"
    algorithm: dict[str, Any]  # the estimator's own keyword arguments


class BatchLayout:
    """Feature layout of a batch spec: names <-> indices, feature -> group, costs."""

    def __init__(self, spec: ModelCreate) -> None:
        self.spec = spec
        self.group_names = [g.name for g in spec.groups]
        self.costs = np.array([g.cost for g in spec.groups], dtype=np.float64)
        sizes = [len(g.features) for g in spec.groups]
        self.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.offsets[1:])
        self.n_features = int(self.offsets[-1])
        self.n_groups = len(sizes)
        self.group_of = np.repeat(np.arange(self.n_groups, dtype=np.int64), sizes)
        self.group_index = {name: g for g, name in enumerate(self.group_names)}
        self.feature_index = [{name: int(self.offsets[g]) + k for k, name in
                               enumerate(group.features)} for g, group in enumerate(spec.groups)]

    @cached_property
    def feature_names(self) -> list[str]:
        return [name for group in self.spec.groups for name in group.features]

    def group_features(self, g: int) -> np.ndarray:
        return np.arange(self.offsets[g], self.offsets[g + 1], dtype=np.int64)

    @cached_property
    def groups(self) -> list[np.ndarray]:
        return [self.group_features(g) for g in range(self.n_groups)]

    def group_ids(self, names, field: str = "computed_groups") -> list[int]:
        """Group names -> ids; a 422 naming the first unknown one."""
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise item_error("must be a list of group names", field=field)
        ids = []
        for name in names:
            g = self.group_index.get(name)
            if g is None:
                raise item_error(f"unknown group {name!r}; this model has "
                                 f"{self.group_names}", field=field)
            ids.append(g)
        return sorted(set(ids))

    def features_of(self, groups) -> np.ndarray:
        parts = [self.groups[g] for g in sorted(groups)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def cost_of(self, groups) -> float:
        return float(sum(self.costs[g] for g in groups))


def split_params(spec: ModelCreate) -> BatchParams:
    """The service's parameters (defaults filled in) and the estimator's; 422 naming the
    problem. Unknown names are refused, with the known ones listed."""
    family = spec.family
    params = dict(spec.params)
    fraction = params.pop("validation_fraction", 0.2)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or \
            not 0.0 <= fraction < 1.0:
        raise item_error("must be a number in [0, 1)", field="params.validation_fraction")
    every_n, every_s = _DEFAULT_POLICY[family]
    every_n = params.pop("retrain_every_examples", every_n)
    every_s = params.pop("retrain_every_seconds", every_s)
    if every_n is not None and (isinstance(every_n, bool) or not isinstance(every_n, int)
                                or every_n < 1):
        raise item_error("must be a positive integer or null",
                         field="params.retrain_every_examples")
    if every_s is not None and (isinstance(every_s, bool) or
                                not isinstance(every_s, int | float) or
                                not math.isfinite(every_s) or every_s <= 0):
        raise item_error("must be a positive number of seconds or null",
                         field="params.retrain_every_seconds")
    window = None
    raw_window = params.pop("window", None)
    if family in _DEFAULT_WINDOW:
        window = _window(raw_window, _DEFAULT_WINDOW[family])
    elif raw_window is not None:
        raise item_error("anytime models keep sufficient statistics of every example, not a "
                         "window", field="params.window")
    estimator = params.pop("estimator", "relaxed" if family == "nvsd" else None)
    if family == "nvsd" and estimator not in ("relaxed", "plain"):
        raise item_error("must be 'relaxed' (RelaxedNVSD) or 'plain' (NVSD)",
                         field="params.estimator")
    if family != "nvsd" and estimator is not None:
        raise item_error("only nvsd models choose an estimator", field="params.estimator")
    known, deprecated = _estimator_keywords(spec, estimator)
    known -= _RESERVED[family]
    unknown = sorted(set(params) - known - deprecated)
    if unknown:
        listed = (known | set(SERVICE_PARAMS[:3]) | _window_names(family))
        raise item_error(f"unknown parameters {unknown} for {spec.algorithm}; known: "
                         f"{sorted(listed)}", field=f"params.{unknown[0]}")
    try:  # a renamed parameter's old name (e.g. gbfs's mu) reaches the estimator renamed
        params = canonical_params(_estimator_classes(spec, estimator)[-1], params)
    except TypeError as exc:
        raise item_error(str(exc), field="params") from exc
    return BatchParams(float(fraction), every_n, None if every_s is None else float(every_s),
                       window, estimator, params)


def _window_names(family: str) -> set[str]:
    """The service's parameters beyond the first three, for this family."""
    return {"gbfs": {"window"}, "nvsd": {"window", "estimator"},
            "auto": {"window"}}.get(family, set())


def _window(raw, default_size: int) -> Window:
    if raw is None:
        return Window("newest", default_size, 0)
    if not isinstance(raw, dict) or set(raw) - {"kind", "size", "seed"}:
        raise item_error('must be {"kind": "newest" | "reservoir", "size": N, "seed": s}',
                         field="params.window")
    kind = raw.get("kind", "newest")
    size = raw.get("size", default_size)
    seed = raw.get("seed", 0)
    if kind not in ("newest", "reservoir"):
        raise item_error("must be 'newest' or 'reservoir'", field="params.window.kind")
    if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= 10_000_000:
        raise item_error("must be an integer in [2, 10000000]", field="params.window.size")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise item_error("must be an integer in [0, 2^63)", field="params.window.seed")
    return Window(kind, size, seed)


def _estimator_classes(spec: ModelCreate, estimator: str | None) -> list[type]:
    """The estimator classes whose keywords ``params`` may use (the built one last)."""
    from algorithms.anytime import AnytimeLinearModel
    from algorithms.gbfs import GBFS
    from algorithms.nvsd import NVSD, RelaxedNVSD
    from algorithms.per_set import PerSetChoice

    if spec.family == "anytime":
        return [AnytimeLinearModel]
    if spec.family == "gbfs":
        return [GBFS]
    if spec.family == "auto":
        return [PerSetChoice]
    return [NVSD, RelaxedNVSD] if estimator == "relaxed" else [NVSD]


def _estimator_keywords(spec: ModelCreate, estimator: str | None
                        ) -> tuple[set[str], set[str]]:
    """(the estimator's keywords, their deprecated spellings, still accepted)."""
    names: set[str] = set()
    deprecated: set[str] = set()
    for cls in _estimator_classes(spec, estimator):
        deprecated |= set(getattr(cls, "_renamed", {}))
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD:
                names.add(name)
    if estimator == "relaxed":
        names -= {"tau", "warm_start"}  # the relaxed estimator runs a tau path itself
    return names - deprecated, deprecated


def validation_size(window: Window, fraction: float) -> int:
    """Rows kept of the held-out part: in proportion to the training window."""
    if fraction <= 0:
        return 0
    return max(1, int(math.ceil(window.size * fraction / (1.0 - fraction))))


HELD_OUT_ROWS = 5000  # anytime classification: held-out rows kept for per-set figures
HELD_OUT_BYTES = 64 << 20  # ... and at most this many bytes of them


def held_out_capacity(n_features: int) -> int:
    """Rows of the anytime classification models' reservoir of held-out rows
    (``fold_state``): ``HELD_OUT_ROWS``, fewer when D is so large that they would pass
    ``HELD_OUT_BYTES`` (at least 100)."""
    return int(max(100, min(HELD_OUT_ROWS, HELD_OUT_BYTES // (8 * max(n_features, 1)))))


def memory_bytes(spec: ModelCreate, params: BatchParams) -> int:
    """Peak memory of one process that folds, snapshots, retrains and serves the model (the
    embedded backend; a Redis worker holds less): :attr:`SizeEstimate.peak_bytes`."""
    return estimate_sizes(spec, params).peak_bytes


# ------------------------------------------------------------------ sizes and fit times
# Every constant below was measured on the development machine (2 shared cores, OpenBLAS;
# tracemalloc peaks of a warm process, as tests/service/test_model_sizes.py measures them,
# and wall times of service.batch.fit.fit) and is documented in docs/operations.md. A
# process's first retrain also compiles / loads kernels (about 15 MB more, once).
_HEADER_BYTES = 64 << 10  # archive headers, metadata, small arrays of a blob
_ANYTIME_FIT_SQUARES = 7.5  # an anytime fit's peak, in D x D float64 arrays (measured 7.3 at
# D = 1,000: the statistics' copies, the standardized Gram, the sequencing workspace, the
# packed version); group-lasso's pseudo-data: 9 (measured 8.3)
_ANYTIME_LOAD_SQUARES = 5  # loading an anytime version, beyond its blob (measured 5.1)
_NVSD_KERNEL_BLOCKS = 4.5  # an NVSD fit's peak in (n·D)² float64 (measured 4.1)
_SNAPSHOT_COPIES = {"anytime": 1.75, "window": 2.75}  # serializing a snapshot of S bytes holds
# about this many times S (measured 1.56 statistics, 2.6 windows)


@dataclass(frozen=True)
class SizeEstimate:
    """What a batch model costs, in bytes, by part (``parts``; the 422 of a creation that
    does not fit names each):

    - ``fold_state``: the fold's statistics or windows (memory of the folding process);
    - ``snapshot``: one snapshot, stored by the backend, and ``snapshot_write``: the
      memory that serializing and writing it takes (the blob included);
    - ``fit_peak``: a retrain's working memory at its peak (the copies it fits on, the
      estimator's workspace, the version it packs), or loading that version, the larger;
    - ``served``: the served version in the memory of every serving process;
    - ``versions_kept``: ``versions`` versions of ``artifact`` bytes in the backend (the
      ``versions_kept`` newest and the current one).
    """

    fold_state: int
    snapshot: int
    snapshot_write: int
    fit_peak: int
    served: int
    artifact: int
    versions: int

    @property
    def versions_kept(self) -> int:
        return self.versions * self.artifact

    @property
    def peak_bytes(self) -> int:
        """Memory of one process that folds, retrains and serves, a snapshot being written
        meanwhile (the fold writes snapshots while a retrain runs)."""
        return self.fold_state + self.snapshot_write + self.fit_peak + self.served

    @property
    def stored_bytes(self) -> int:
        """What the backend stores: the snapshot and the kept versions."""
        return self.snapshot + self.versions_kept

    def parts(self) -> dict[str, int]:
        """Part -> bytes; their sum is :attr:`total`."""
        return {"fold_state": self.fold_state,
                "snapshot": self.snapshot + self.snapshot_write,
                "fit_peak": self.fit_peak, "served_version": self.served,
                "versions_kept": self.versions_kept}

    @property
    def total(self) -> int:
        return self.peak_bytes + self.stored_bytes


PART_NAMES = {"fold_state": "fold state", "snapshot": "snapshot (stored, and written)",
              "fit_peak": "fit peak", "served_version": "served version",
              "versions_kept": "kept versions"}


def _statistics_bytes(D: int) -> int:
    return 8 * (D * D + 3 * D) + _HEADER_BYTES


def _gbfs_options(spec: ModelCreate, params: BatchParams) -> dict[str, Any]:
    """GBFS's keyword arguments (its defaults filled in) for a gbfs or auto model."""
    from algorithms.gbfs import GBFS

    own = params.algorithm if spec.family == "gbfs" else \
        (params.algorithm.get("gbfs_params") or {})
    options = {name: p.default for name, p in inspect.signature(GBFS.__init__).parameters.items()
               if p.default is not inspect.Parameter.empty}
    if isinstance(own, dict):
        options.update(own)
    return options


def _int(value, default: int, low: int = 0, high: int = 1 << 20) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return int(value) if ok else default


def estimate_sizes(spec: ModelCreate, params: BatchParams, *,
                   versions_kept: int = 10) -> SizeEstimate:
    """The sizes of :class:`SizeEstimate` for this spec at its largest (full windows, a
    full held-out reservoir). O(1) but for reading the estimator's defaults.

    anytime (D features, J groups): statistics ``8·(D² + 3D)`` each, two of them (training
    and validation), plus for classification a reservoir of ``R = held_out_capacity(D)``
    held-out rows (``8·R·(D+1)``); a version holds the Gram's upper triangle, the prefix
    weights and the validation statistics (``8·(1.5·D² + (J+8)·D)``, plus the held-out
    rows), served with the full Gram rebuilt (``+ 4·D²``); a fit peaks at ``7.5`` D x D
    arrays (group-lasso ``9``), loading a version at ``5`` beyond its blob; writing a
    snapshot of S bytes holds ``1.75·S`` (windows ``2.75·S``).
    gbfs / auto (window of N rows and N_val held out): windows ``8·(N + N_val)·(D+1)``; a fit
    holds the copies (``8·(N + 2·N_val)·D``), the early-stopping split (``8·N·D``), the bin
    codes with ``c`` masked copies (``(c + 2)·N·D``), the histograms
    (``(24 + 16·newton)·2^(depth-1)·D·(bins+1)``) and the version it packs; a version
    holds the held-out rows, bin edges and trees; auto adds the anytime half (its
    statistics and fit, ``12·8·D²``, and ``8·D²`` in the version).
    nvsd (window of n rows): a fit holds ``4.5`` (n·D)² float64 (the kernel-derivative
    blocks); a version the support models' rows."""
    D, J = int(spec.dimension), len(spec.groups)
    square = 8 * D * D
    versions = max(0, int(versions_kept)) + 1  # the newest ones and the current
    if spec.family == "anytime":
        rows = 0
        if spec.task == "classification" and params.validation_fraction > 0:
            rows = 8 * held_out_capacity(D) * (D + 1)
        fold = 2 * _statistics_bytes(D) + rows
        snapshot = fold + _HEADER_BYTES
        artifact = square // 2 + 8 * (J + 8) * D + _statistics_bytes(D) + rows
        served = artifact + square // 2
        squares = 9 if spec.algorithm == "group-lasso" else _ANYTIME_FIT_SQUARES
        fit = int(squares * square) + 3 * rows
        load = artifact + _ANYTIME_LOAD_SQUARES * square + rows
        return SizeEstimate(fold, snapshot, int(_SNAPSHOT_COPIES["anytime"] * snapshot),
                            max(fit, load), served, artifact, versions)
    window = params.window
    n = window.size
    n_val = validation_size(window, params.validation_fraction)
    fold = 8 * (n + n_val) * (D + 1)
    snapshot = fold + _HEADER_BYTES
    write = int(_SNAPSHOT_COPIES["window"] * snapshot)
    if spec.family == "nvsd":
        nd = n * D
        artifact = 2 * 8 * n * (D + 1) + _HEADER_BYTES
        fit = int(_NVSD_KERNEL_BLOCKS * 8 * nd * nd) + 3 * fold
        return SizeEstimate(fold, snapshot, write, max(fit, 5 * artifact), artifact,
                            artifact, versions)
    options = _gbfs_options(spec, params)
    copies = _int(options.get("masked_copies"), 4, 0, 64)
    depth = _int(options.get("max_depth"), 4, 1, 30)
    bins = _int(options.get("max_bins"), 255, 2, 255)
    trees = _int(options.get("n_estimators"), 300, 1, 1 << 24)
    newton = options.get("split_gain") == "newton"
    nodes = 2 ** (depth + 1) - 1
    hist = (24 + (16 if newton else 0)) * 2 ** (depth - 1) * D * (bins + 1)
    early = 8 * n * D if options.get("early_stopping_rounds") is not None else 0
    fit = 8 * (n + 2 * n_val) * D + early + (copies + 2) * n * D + hist + 8 * D * bins
    artifact = 8 * n_val * (D + 1) + 8 * D * bins + 25 * trees * nodes + _HEADER_BYTES
    if spec.family == "auto":
        artifact += square + 8 * (J + 8) * D
        fit += 12 * square
    fit += artifact
    return SizeEstimate(fold, snapshot, write, max(fit, 3 * artifact), artifact, artifact,
                        versions)


# Fit-time constants (seconds per unit of work), measured as above; see docs/operations.md.
ANYTIME_CUBE_SECONDS = 5e-11  # per D³ (factorizations, BLAS; measured 4.6e-11)
ANYTIME_GROUP_SECONDS = 3e-10  # per J·D² (scoring each candidate group; measured 2.8e-10)
GROUP_LASSO_SECONDS = 1.4e-9  # per α·iteration·D² (celer's path at its iteration bound)
GBFS_CELL_SECONDS = 2.5e-9  # per row·feature·level of histograms (measured 1.6e-9)
GBFS_SPLIT_SECONDS = 2e-9  # per node·feature·bin of split search (measured 1.5e-9)
GBFS_FIGURE_SECONDS = 1e-9  # per row·tree·level of the version's per-set figures
NVSD_SECONDS = 5e-10  # per τ·(n·D)³ (measured 1.3e-10 on easy, 3.2e-10 on noisy data; the
# issue's 215-245 s at n·D = 2,400 on 24 τ is 6.9e-10)
FIT_FIXED_SECONDS = 0.2


def estimate_fit_seconds(spec: ModelCreate, params: BatchParams, *,
                         examples: int | None = None) -> float:
    """Expected wall time of one retrain, from the sizes: ``examples`` rows in the window
    (default: the full window) x features x trees (gbfs), the path length x (n·D)³
    (nvsd), D³ and J·D² (anytime's sequencing; iterations x D² for group-lasso); the
    constants above. O(1)."""
    D, J = float(spec.dimension), float(len(spec.groups))

    def anytime(method: str) -> float:
        seconds = ANYTIME_CUBE_SECONDS * D ** 3 + ANYTIME_GROUP_SECONDS * J * D * D
        if method == "group-lasso":
            seconds += ANYTIME_CUBE_SECONDS * D ** 3 + GROUP_LASSO_SECONDS * 60 * 200 * D * D
        return seconds

    if spec.family == "anytime":
        return FIT_FIXED_SECONDS + anytime(spec.algorithm)
    window = params.window
    n = float(window.size if examples is None else max(0, min(examples, window.size)))
    n_val = float(validation_size(window, params.validation_fraction))
    if spec.family == "nvsd":
        options = params.algorithm
        if params.estimator == "relaxed":
            nus = options.get("nus", (1e-3, 1e-1, 1.0))
            ratios = options.get("l1_ratios", (0.25, 0.5, 0.75)) \
                if options.get("regularizer") == "en" else (None,)
            taus = _int(options.get("n_taus"), 8, 1, 1 << 16)
            steps = max(1, len(nus) if isinstance(nus, list | tuple) else 3) * \
                max(1, len(ratios) if isinstance(ratios, list | tuple) else 3) * taus
        else:
            steps = 1
        return FIT_FIXED_SECONDS + NVSD_SECONDS * steps * (n * D) ** 3
    options = _gbfs_options(spec, params)
    copies = _int(options.get("masked_copies"), 4, 0, 64)
    depth = _int(options.get("max_depth"), 4, 1, 30)
    bins = _int(options.get("max_bins"), 255, 2, 255)
    trees = _int(options.get("n_estimators"), 300, 1, 1 << 24)
    rows = (1 + copies) * n
    per_tree = GBFS_CELL_SECONDS * rows * D * depth + \
        GBFS_SPLIT_SECONDS * 2 ** depth * D * (bins + 1)
    figures = GBFS_FIGURE_SECONDS * (J * J / 2 * n_val + (J + 1) * min(n, 5000)) * trees * depth
    seconds = FIT_FIXED_SECONDS + trees * per_tree + figures
    if spec.family == "auto":
        method = params.algorithm.get("method", "cs-g-omp")
        seconds += anytime(method if isinstance(method, str) else "cs-g-omp") + \
            ANYTIME_CUBE_SECONDS * n * D * D
    return seconds
