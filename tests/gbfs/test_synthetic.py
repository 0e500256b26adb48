import numpy as np

from algorithms.datasets.gbfs_synthetic import make_gbfs_synthetic
from algorithms.gbfs import GBFS

# the paper's model: no masked copies, the prefix of trees for a computed set
PAPER = dict(masked_copies=0, uncomputed="prefix", early_stopping_rounds=None)
PAPER_DEFAULTS = dict(n_estimators=100, reg_lambda=0.0, min_samples_leaf=1)


def paper_gbfs(**params) -> GBFS:
    """GBFS with the paper's rule and its earlier defaults, ``params`` on top."""
    return GBFS(**{**PAPER, **PAPER_DEFAULTS, **params})


def test_generator_is_seeded_balanced_and_reports_relevant_features():
    X, y, relevant = make_gbfs_synthetic(500, 15, random_state=2)
    again = make_gbfs_synthetic(500, 15, random_state=2)
    np.testing.assert_array_equal(X, again[0])
    np.testing.assert_array_equal(y, again[1])
    assert X.shape == (500, 15) and relevant.shape == (5,) and len(set(relevant)) == 5
    assert 0.4 < y.mean() < 0.6 and X.min() >= 0.0 and X.max() <= 1.0


def test_gbfs_selects_exactly_the_relevant_features():
    X, y, relevant = make_gbfs_synthetic(500, 15, random_state=2)
    model = paper_gbfs(feature_penalty=1.0, n_estimators=60, max_depth=3).fit(X, y)
    assert set(model.selected_features_) == set(relevant)
    unpenalized = paper_gbfs(feature_penalty=0.0, n_estimators=60, max_depth=3).fit(X, y)
    assert len(unpenalized.selected_features_) > 5
