"""The numba cache key covers every source that holds kernels: editing a helper that a
cached kernel inlines from another module (``service/_swar.py`` into ``service/_json.py``,
``algorithms/sparse/_bytes.py`` into both) must start a fresh cache, or numba would keep
the stale compiled copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import algorithms
from algorithms import kernel_cache_key, kernel_sources

ROOT = Path(algorithms.__file__).resolve().parent


def tree(tmp_path: Path) -> Path:
    """A copy of the package and of the service's sources; returns the package folder."""
    shutil.copytree(ROOT, tmp_path / "algorithms", ignore=shutil.ignore_patterns(
        "__pycache__"))
    shutil.copytree(ROOT.parent / "service", tmp_path / "service",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "algorithms"


def edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


def test_the_key_covers_the_service_kernels_and_their_helpers():
    names = {path.relative_to(ROOT.parent).as_posix() for path in kernel_sources()}
    assert {"service/_json.py", "service/_swar.py", "service/_kernels.py",
            "algorithms/sparse/_bytes.py", "algorithms/online/_fused.py"} <= names
    assert "service/app.py" not in names   # no kernels: editing it keeps the cache


def test_editing_any_kernel_source_changes_the_key(tmp_path):
    root = tree(tmp_path)
    key = kernel_cache_key(root)
    assert kernel_cache_key(root) == key
    for source in ("service/_swar.py", "algorithms/sparse/_bytes.py",
                   "algorithms/online/_topset.py"):
        edit(tmp_path / source)
        assert kernel_cache_key(root) != key, source
        key = kernel_cache_key(root)
    edit(tmp_path / "service" / "app.py")
    assert kernel_cache_key(root) == key


def test_the_cache_folder_is_named_after_the_key(monkeypatch, tmp_path):
    from numba.core import config

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)
    algorithms._isolate_numba_cache()
    assert Path(config.CACHE_DIR) == tmp_path / "featurebudget" / "numba" / kernel_cache_key()
    assert Path(config.CACHE_DIR).is_dir()
