r"""Per-row losses of a budgeted predictor's output, the currency of acquisition.

* ``"squared"`` (regression): ``(y_i - \hat y_i)^2``; the output is the prediction (n,).
* ``"log"`` (classification): ``-log p_i(y_i)`` with the probabilities clipped to
  ``[PROBA_CLIP, 1 - PROBA_CLIP]``. Binary: the output is ``P(y = 1)`` (n,) and ``y`` is
  0/1; K classes: the output is an (n, K) matrix of class probabilities (rows summing to
  1) and ``y`` the class index in ``0..K-1``, so K-class log-loss drops in unchanged.

O(n) (O(n K) for K classes).
"""

from __future__ import annotations

import numpy as np

LOSSES = ("squared", "log")
PROBA_CLIP = 1e-6


def row_losses(loss: str, y: np.ndarray, output: np.ndarray) -> np.ndarray:
    """The loss of each row, float64 (n,); ValueError on a shape or loss it does not know."""
    y = np.asarray(y, dtype=np.float64).ravel()
    out = np.asarray(output, dtype=np.float64)
    if loss == "squared":
        if out.shape != y.shape:
            raise ValueError(f"squared loss needs {y.shape} predictions, got {out.shape}")
        return (y - out) ** 2
    if loss != "log":
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if out.ndim == 1:
        if out.shape != y.shape:
            raise ValueError(f"binary log-loss needs {y.shape} probabilities, got {out.shape}")
        p = np.clip(out, PROBA_CLIP, 1.0 - PROBA_CLIP)
        return -np.where(y > 0.5, np.log(p), np.log1p(-p))
    if out.ndim != 2 or out.shape[0] != y.size:
        raise ValueError(f"K-class log-loss needs ({y.size}, K) probabilities, got "
                         f"{out.shape}")
    label = y.astype(np.int64)
    if np.any(label < 0) or np.any(label >= out.shape[1]) or np.any(label != y):
        raise ValueError(f"K-class labels must be integers in [0, {out.shape[1]})")
    p = np.clip(out[np.arange(y.size), label], PROBA_CLIP, 1.0 - PROBA_CLIP)
    return -np.log(p)


__all__ = ["LOSSES", "PROBA_CLIP", "row_losses"]
