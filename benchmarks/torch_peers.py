"""GDFS and DIME over feature groups with costs, on the CPU with PyTorch: the neural peers
of ``benchmarks/acquisition_quality.py`` (a benchmark extra; never a dependency of the
service: ``pip install torch`` to run them).

- **GDFS**: Covert, Qiu, Lu, Kim, White, Lee, *Learning to Maximize Mutual Information
  for Dynamic Feature Selection* (ICML 2023). A predictor ``f(x_S, m)`` and a selector
  ``pi(x_S, m)`` (logits over the groups); training unrolls ``T`` selections, each a
  Concrete (Gumbel-softmax) sample from ``pi`` over the groups not yet chosen, the soft
  masks accumulated by max, the loss the mean over steps of ``l(f(x_m), y)``, the
  temperature annealed geometrically; at test, the greedy argmax of ``pi`` among the
  groups that fit. Cost-agnostic, as published.
- **DIME**: Gadgil, Covert, Lee, *Estimating Conditional Mutual Information for Dynamic
  Feature Selection* (ICLR 2024). A predictor and a value network ``v(x_S, m)`` whose
  output ``v_g`` estimates the expected loss drop of acquiring ``g`` (the conditional
  mutual information for log-loss), trained by regression on the drop observed for the
  group chosen (``argmax v_g / c_g``, epsilon-greedy); at test the largest ``v_g / c_g``
  that fits, stopping with an exchange rate ``lam`` when ``max v_g / c_g < lam``.

Both networks read the standardised features with the uncomputed ones zeroed, next to the
groups' mask; two hidden layers of 128 ReLU units; Adam; the predictor is pre-trained on
random subsets (each group kept with a probability drawn uniformly per row), then trained
with the policy; early stopping on the held-out window's loss. Losses: log-loss (binary,
K classes) or squared error (regression, on the standardised target). A decision for a
whole batch of rows is one forward pass: O(rows (d + J) h + rows h^2).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

try:
    import torch
    from torch import nn
    from torch.nn import functional
except ImportError:  # the benchmark runs without them
    torch = None

HIDDEN = 128
BATCH = 128
LR = 1e-3
PRETRAIN_EPOCHS = 150
POLICY_EPOCHS = 120
PATIENCE = 12


def available() -> bool:
    return torch is not None


class _Net(nn.Module if torch is not None else object):
    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(inputs, HIDDEN), nn.ReLU(),
                                  nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                                  nn.Linear(HIDDEN, outputs))

    def forward(self, x):
        return self.body(x)


class _Peer:
    """What GDFS and DIME share: the groups, the standardisation, the masked input, the
    predictor and its loss."""

    def __init__(self, groups: Sequence[Sequence[int]], costs: Sequence[float], kind: str,
                 n_classes: int = 2, random_state: int = 0) -> None:
        self.groups = [list(g) for g in groups]
        self.costs = np.asarray(costs, dtype=np.float64)
        self.kind = kind
        self.n_classes = n_classes
        self.random_state = random_state
        self.J = len(self.groups)
        self.expand_ = None

    # --------------------------------------------------------------------- plumbing
    def _setup(self, X: np.ndarray, y: np.ndarray) -> None:
        torch.manual_seed(self.random_state)
        self.rng_ = np.random.default_rng(self.random_state)
        self.mean_ = np.nanmean(X, axis=0)
        sd = np.nanstd(X, axis=0)
        self.sd_ = np.where(sd > 0, sd, 1.0)
        d = X.shape[1]
        expand = np.zeros((self.J, d), dtype=np.float32)
        for g, features in enumerate(self.groups):
            expand[g, features] = 1.0
        self.expand_ = torch.from_numpy(expand)
        if self.kind == "regression":
            self.y_mean_, self.y_sd_ = float(np.mean(y)), float(np.std(y)) or 1.0
        self.outputs_ = 1 if self.kind in ("regression", "binary") else self.n_classes
        self.predictor_ = _Net(d + self.J, self.outputs_)

    def _x(self, X: np.ndarray):
        Z = (np.asarray(X, dtype=np.float64) - self.mean_) / self.sd_
        return torch.from_numpy(np.nan_to_num(Z).astype(np.float32))

    def _y(self, y: np.ndarray):
        if self.kind == "regression":
            return torch.from_numpy(((y - self.y_mean_) / self.y_sd_).astype(np.float32))
        if self.kind == "binary":
            return torch.from_numpy((np.asarray(y) > 0.5).astype(np.float32))
        return torch.from_numpy(np.asarray(y, dtype=np.int64))

    def _inputs(self, x, mask):
        return torch.cat([x * (mask @ self.expand_), mask], dim=1)

    def _loss(self, out, y, reduce: bool = True):
        if self.kind == "regression":
            loss = (out[:, 0] - y) ** 2
        elif self.kind == "binary":
            loss = functional.binary_cross_entropy_with_logits(out[:, 0], y, reduction="none")
        else:
            loss = functional.cross_entropy(out, y, reduction="none")
        return loss.mean() if reduce else loss

    def _batches(self, n: int):
        order = self.rng_.permutation(n)
        for start in range(0, n, BATCH):
            yield torch.from_numpy(order[start:start + BATCH])

    def _random_masks(self, n: int):
        keep = self.rng_.random((n, 1))
        return torch.from_numpy((self.rng_.random((n, self.J)) < keep).astype(np.float32))

    def _pretrain(self, x, y, xv, yv) -> None:
        """The predictor on random subsets, early-stopped on the window (fixed masks)."""
        opt = torch.optim.Adam(self.predictor_.parameters(), lr=LR)
        val_masks = self._random_masks(xv.shape[0])
        best, state, waited = np.inf, None, 0
        for _ in range(PRETRAIN_EPOCHS):
            self.predictor_.train()
            for idx in self._batches(x.shape[0]):
                mask = self._random_masks(idx.numel())
                loss = self._loss(self.predictor_(self._inputs(x[idx], mask)), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            self.predictor_.eval()
            with torch.no_grad():
                value = float(self._loss(self.predictor_(self._inputs(xv, val_masks)), yv))
            if value < best - 1e-6:
                best, state, waited = value, copy.deepcopy(self.predictor_.state_dict()), 0
            elif (waited := waited + 1) >= PATIENCE:
                break
        self.predictor_.load_state_dict(state)

    # -------------------------------------------------------------------- answering
    def predict_output(self, X: np.ndarray, sets: Sequence[Sequence[int]]) -> np.ndarray:
        """The network's own answer for each row with its acquired groups: a probability
        (binary), K probabilities, or the target (regression)."""
        mask = np.zeros((len(sets), self.J), dtype=np.float32)
        for i, S in enumerate(sets):
            mask[i, list(S)] = 1.0
        self.predictor_.eval()
        with torch.no_grad():
            out = self.predictor_(self._inputs(self._x(X), torch.from_numpy(mask)))
        if self.kind == "regression":
            return out[:, 0].numpy() * self.y_sd_ + self.y_mean_
        if self.kind == "binary":
            return torch.sigmoid(out[:, 0]).numpy()
        return torch.softmax(out, dim=1).numpy()

    def _scores(self, x, mask):
        raise NotImplementedError

    def _greedy_loss(self, x, y, steps: int) -> float:
        """The window's loss averaged over the first ``steps`` greedy choices (the best
        ``_scores`` among the groups not yet chosen): the early-stopping figure."""
        self.predictor_.eval()
        with torch.no_grad():
            mask = torch.zeros((x.shape[0], self.J))
            total = 0.0
            for _ in range(steps):
                scores = self._scores(x, mask).masked_fill(mask > 0, -np.inf)
                mask = mask.clone()
                mask[torch.arange(x.shape[0]), scores.argmax(dim=1)] = 1.0
                total += float(self._loss(self.predictor_(self._inputs(x, mask)), y))
        return total / steps

    def loss_unit(self, X: np.ndarray, y: np.ndarray) -> float:
        """``(L(empty) - L(all)) / total cost`` on rows ``X, y`` in the network's own loss
        units: the scale of an exchange rate."""
        x, t = self._x(X), self._y(y)
        self.predictor_.eval()
        with torch.no_grad():
            empty = float(self._loss(self.predictor_(self._inputs(
                x, torch.zeros((x.shape[0], self.J)))), t))
            full = float(self._loss(self.predictor_(self._inputs(
                x, torch.ones((x.shape[0], self.J)))), t))
        return max(empty - full, 1e-12) / float(self.costs.sum())

    def episodes(self, X: np.ndarray, *, max_cost: float | None,
                 exchange_rate: float | None = None) -> list[tuple[int, ...]]:
        """Every row's episode from the empty set, all rows at once: each step the best
        score (``_scores``) among the missing groups that fit what the cap leaves; a row
        stops when none fits (or, with an exchange rate, none scores ``lam`` or more)."""
        x = self._x(X)
        n = x.shape[0]
        mask = torch.zeros((n, self.J))
        spent = np.zeros(n)
        active = np.ones(n, dtype=bool)
        costs = self.costs
        slack = 1e-9 * max(1.0, float(costs.sum()))
        with torch.no_grad():
            for _ in range(self.J):
                if not active.any():
                    break
                scores = self._scores(x, mask).numpy().astype(np.float64)
                room = np.inf if max_cost is None else max_cost - spent
                fits = (mask.numpy() == 0) & (costs[None, :] <= np.reshape(room, (-1, 1))
                                               + slack)
                scores = np.where(fits, scores, -np.inf)
                pick = np.argmax(scores, axis=1)
                best = scores[np.arange(n), pick]
                go = active & np.isfinite(best)
                if exchange_rate is not None:
                    go &= best >= exchange_rate
                active = go
                rows = np.flatnonzero(go)
                mask[rows, pick[rows]] = 1.0
                spent[rows] += costs[pick[rows]]
        chosen = mask.numpy() > 0
        return [tuple(int(g) for g in np.flatnonzero(row)) for row in chosen]


class GDFS(_Peer):
    """Greedy dynamic feature selection (module docstring); ``steps``: the selections
    unrolled in training (default every group, at most 10)."""

    def __init__(self, groups, costs, kind, n_classes=2, random_state=0, steps=None,
                 tau=(2.0, 0.1)) -> None:
        super().__init__(groups, costs, kind, n_classes, random_state)
        self.steps = steps
        self.tau = tau

    def fit(self, X, y, Xv, yv) -> GDFS:
        self._setup(X, y)
        x, t, xv, tv = self._x(X), self._y(y), self._x(Xv), self._y(yv)
        self._pretrain(x, t, xv, tv)
        self.selector_ = _Net(X.shape[1] + self.J, self.J)
        steps = self.steps or min(self.J, 10)
        params = list(self.selector_.parameters()) + list(self.predictor_.parameters())
        opt = torch.optim.Adam(params, lr=LR)
        best, state, waited = np.inf, None, 0
        for epoch in range(POLICY_EPOCHS):
            tau = self.tau[0] * (self.tau[1] / self.tau[0]) ** (epoch / max(1, POLICY_EPOCHS - 1))
            self.selector_.train()
            self.predictor_.train()
            for idx in self._batches(x.shape[0]):
                xb, yb = x[idx], t[idx]
                mask = torch.zeros((idx.numel(), self.J))
                loss = 0.0
                for _ in range(steps):
                    logits = self.selector_(self._inputs(xb, mask))
                    logits = logits.masked_fill(mask > 0.999, -1e9)
                    soft = functional.gumbel_softmax(logits, tau=tau, hard=False)
                    mask = torch.maximum(mask, soft)
                    loss = loss + self._loss(self.predictor_(self._inputs(xb, mask)), yb)
                opt.zero_grad()
                (loss / steps).backward()
                opt.step()
            value = self._greedy_loss(xv, tv, steps)
            if value < best - 1e-6:
                best, waited = value, 0
                state = (copy.deepcopy(self.selector_.state_dict()),
                         copy.deepcopy(self.predictor_.state_dict()))
            elif (waited := waited + 1) >= PATIENCE:
                break
        self.selector_.load_state_dict(state[0])
        self.predictor_.load_state_dict(state[1])
        return self

    def _scores(self, x, mask):
        self.selector_.eval()
        return self.selector_(self._inputs(x, mask))


class DIME(_Peer):
    """Dynamic feature selection by estimated conditional mutual information (module
    docstring); ``epsilon``: the exploration probability in training, ``steps`` the
    selections unrolled (default every group, at most 10)."""

    def __init__(self, groups, costs, kind, n_classes=2, random_state=0, steps=None,
                 epsilon=(0.5, 0.05)) -> None:
        super().__init__(groups, costs, kind, n_classes, random_state)
        self.steps = steps
        self.epsilon = epsilon

    def fit(self, X, y, Xv, yv) -> DIME:
        self._setup(X, y)
        x, t, xv, tv = self._x(X), self._y(y), self._x(Xv), self._y(yv)
        self._pretrain(x, t, xv, tv)
        self.value_ = _Net(X.shape[1] + self.J, self.J)
        steps = self.steps or min(self.J, 10)
        costs = torch.from_numpy(np.maximum(self.costs, 1e-9).astype(np.float32))
        opt = torch.optim.Adam(list(self.value_.parameters())
                               + list(self.predictor_.parameters()), lr=LR)
        best, state, waited = np.inf, None, 0
        for epoch in range(POLICY_EPOCHS):
            eps = self.epsilon[0] + (self.epsilon[1] - self.epsilon[0]) * min(
                1.0, epoch / max(1, POLICY_EPOCHS // 2))
            self.value_.train()
            self.predictor_.train()
            for idx in self._batches(x.shape[0]):
                xb, yb = x[idx], t[idx]
                rows = torch.arange(idx.numel())
                mask = torch.zeros((idx.numel(), self.J))
                total = 0.0
                before = self._loss(self.predictor_(self._inputs(xb, mask)), yb, reduce=False)
                for _ in range(steps):
                    value = self.value_(self._inputs(xb, mask))
                    ratio = (value.detach() / costs).masked_fill(mask > 0, -np.inf)
                    pick = ratio.argmax(dim=1)
                    explore = torch.from_numpy(self.rng_.random(idx.numel()) < eps)
                    if explore.any():
                        free = (mask[explore] == 0).float()
                        pick[explore] = torch.multinomial(free, 1)[:, 0]
                    mask = mask.clone()
                    mask[rows, pick] = 1.0
                    after = self._loss(self.predictor_(self._inputs(xb, mask)), yb,
                                       reduce=False)
                    drop = (before - after).detach()
                    total = total + functional.mse_loss(value[rows, pick], drop) + after.mean()
                    before = after
                opt.zero_grad()
                (total / steps).backward()
                opt.step()
            score = self._greedy_loss(xv, tv, steps)
            if score < best - 1e-6:
                best, waited = score, 0
                state = (copy.deepcopy(self.value_.state_dict()),
                         copy.deepcopy(self.predictor_.state_dict()))
            elif (waited := waited + 1) >= PATIENCE:
                break
        self.value_.load_state_dict(state[0])
        self.predictor_.load_state_dict(state[1])
        return self

    def _scores(self, x, mask):
        """``v_g / c_g``: the estimated loss drop per unit cost (on the standardised
        target's scale for regression)."""
        self.value_.eval()
        costs = torch.from_numpy(np.maximum(self.costs, 1e-9).astype(np.float32))
        return self.value_(self._inputs(x, mask)) / costs


__all__ = ["DIME", "GDFS", "available"]
