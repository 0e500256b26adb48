"""The online learners as River classifiers: ``learn_one`` / ``predict_one`` /
``predict_proba_one`` on dict examples.

River is an optional extra (``pip install featurebudget[test]`` or ``river`` itself): it is
imported by this module only, so the package and the service run without it.

:class:`OnlineClassifier` wraps any online learner (PET, FOFS, SOFS, OGD, AROW) given as
an unfitted *template*: the adapter trains its own copy, built at the first call with
``n_features = 2 ** hash_bits``. Feature names go to indices by the project's hashing
(``algorithms.sparse.hashing``, MurmurHash3 of ``str(name)`` in one namespace, the
service's hashing of named features), so the space never grows and a learner of the
selecting kind keeps at most ``budget`` weights however many names stream by; two names
may collide (their values add up), rarely for ``2 ** hash_bits`` well above the number of
names. A numeric value is the feature's value; a string value ``v`` of feature ``k`` is the
feature ``"k=v"`` with value 1 (one-hot); None is absent. Indices of the names seen are
cached (the first 65,536 names), and each index keeps the first 4 names that hashed to it,
so :meth:`OnlineClassifier.selected_features` and ``weights`` answer in names, not in
hashed slots (memory O(min(names, 4 * 2 ** hash_bits))).

Labels are River's binary convention: ``y`` True (or 1) is the positive class, False (or 0,
or -1) the negative one; ``predict_proba_one`` returns ``{False: 1 - p, True: p}`` with
``p = sigmoid(w . x)``, the logistic link of the learner's margin (as River's own linear
classifiers, its Perceptron included, squash theirs); a hinge-loss learner's ``p`` is a
monotone score, not a calibrated probability. ``predict_one`` is ``w . x >= 0``, the
learner's own ``predict``. Each call is one example: the learner's kernels run on a
one-row batch (per-example Python here is River's protocol; the learners' batch methods
add none).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from river import base

from algorithms.online import LEARNERS, OnlineLearner
from algorithms.sparse import CSRBatch
from algorithms.sparse.hashing import FeatureHasher

_CACHED_NAMES = 65_536   # name -> index entries kept (later names are hashed each time)
_NAMES_PER_SLOT = 4      # names remembered per hashed index (collisions are rare)
_NAMESPACE = ""


class OnlineClassifier(base.Classifier):
    """A featurebudget online learner as a River binary classifier.

    Parameters
    ----------
    learner
        The learner to train, unfitted (PET, FOFS, SOFS, OGD or AROW with its
        hyperparameters; its ``n_features`` is replaced by ``2 ** hash_bits``). The
        adapter trains a copy; ``learner_`` is that copy once the first example arrived.
    hash_bits
        The feature space has ``2 ** hash_bits`` indices (1 to 31; 18: 262,144).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from algorithms.online import FOFS
    >>> model = preprocessing.StandardScaler() | OnlineClassifier(FOFS(budget=5))
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 86.08%
    >>> len(model["OnlineClassifier"].selected_features())   # of the 9 features, by name
    5
    """

    def __init__(self, learner: OnlineLearner, hash_bits: int = 18) -> None:
        self.learner = learner
        self.hash_bits = hash_bits
        self.learner_: OnlineLearner | None = None
        self._hasher: FeatureHasher | None = None
        self._indices: dict[Any, int] = {}
        self._names: dict[int, list[Any]] = {}   # hashed index -> the names seen there

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from algorithms.online import SOFS

        yield {"learner": SOFS(budget=5), "hash_bits": 10}

    # ------------------------------------------------------------------ the learner
    def _model(self) -> OnlineLearner:
        """The trained copy, built at the first call (arguments checked then)."""
        if self.learner_ is None:
            if not isinstance(self.learner, OnlineLearner) or \
                    type(self.learner) not in LEARNERS.values():
                raise TypeError(f"learner must be one of {sorted(LEARNERS)} (an "
                                f"OnlineLearner), got {type(self.learner).__name__}")
            bits = self.hash_bits
            if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or \
                    not 1 <= bits <= 31:
                raise ValueError(f"hash_bits must be an integer in [1, 31], got {bits!r}")
            self._hasher = FeatureHasher(int(bits))
            params = self.learner.get_params(deep=False)
            params["n_features"] = self._hasher.n_features
            self.learner_ = type(self.learner)(**params)
        return self.learner_

    def _index(self, name: Any) -> int:
        index = self._indices.get(name)
        if index is None:
            index = self._hasher.index(_NAMESPACE, str(name))
            if len(self._indices) < _CACHED_NAMES:
                self._indices[name] = index
            names = self._names.setdefault(index, [])
            if len(names) < _NAMES_PER_SLOT and name not in names:
                names.append(name)
        return index

    def _batch(self, x: Mapping[Any, Any]) -> CSRBatch:
        """``x`` as a one-row batch over the hashed space (colliding names add up)."""
        learner = self._model()
        row: dict[int, float] = {}
        for name, value in x.items():
            if value is None:
                continue
            if isinstance(value, str):
                index, value = self._index(f"{name}={value}"), 1.0
            elif isinstance(value, numbers.Real):
                index, value = self._index(name), float(value)
            else:
                raise TypeError(f"feature {name!r} has a value of type "
                                f"{type(value).__name__}, not a number or a string")
            row[index] = row.get(index, 0.0) + value
        indices = sorted(row)
        return CSRBatch.from_arrays(np.array([0, len(indices)]), np.array(indices, np.int64),
                                    np.array([row[i] for i in indices], dtype=np.float64),
                                    learner.n_features_in_)

    @staticmethod
    def _label(y: Any) -> float:
        if isinstance(y, (bool, np.bool_)) or (isinstance(y, numbers.Integral)
                                               and int(y) in (-1, 0, 1)):
            return 1.0 if y > 0 else -1.0
        raise ValueError(f"a binary River classifier learns True / False labels, got {y!r}")

    # ------------------------------------------------------------------ River's protocol
    def learn_one(self, x: dict, y: base.typing.ClfTarget) -> None:
        """Learn from one example (test-then-train: the learner scores it first)."""
        batch = self._batch(x)
        self.learner_.partial_fit(batch, np.array([self._label(y)]))

    def _score(self, x: dict) -> float:
        return float(self._model().decision_function(self._batch(x))[0])

    def predict_proba_one(self, x: dict) -> dict[bool, float]:
        """``{False: 1 - p, True: p}``, ``p = sigmoid(w . x)``."""
        score = self._score(x)
        if score >= 0:
            p = 1.0 / (1.0 + math.exp(-score))
        else:
            e = math.exp(score)
            p = e / (1.0 + e)
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict) -> bool:
        """``w . x >= 0``."""
        return self._score(x) >= 0.0

    # ------------------------------------------------------------------ the selection
    @property
    def weights(self) -> dict[Any, float]:
        """The non-zero weights by feature name (as River's linear models' ``weights``),
        largest magnitude first; ``"k=v"`` for a string value; names sharing a hashed index
        share its weight. Empty before the first example. O(k log k) for k non-zeros."""
        if self.learner_ is None:
            return {}
        indices, values = self.learner_.weights()
        order = np.argsort(-np.abs(values), kind="stable")
        return {name: float(values[i]) for i in order.tolist()
                for name in self._names.get(int(indices[i]), ())}

    def selected_features(self) -> list[Any]:
        """The names of the features with a non-zero weight (at most ``budget`` indices
        for a selecting learner), largest weight magnitude first."""
        return list(self.weights)


__all__ = ["OnlineClassifier"]
