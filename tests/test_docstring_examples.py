"""The examples in the algorithms' docstrings run and print what they say (the snippets of
docs/algorithms.md run in tests/test_docs_snippets.py)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["algorithms.online.pet", "algorithms.gbfs.estimator", "algorithms.nvsd.estimator"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
