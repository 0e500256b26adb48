"""featurebudget numerics: online learners, anytime sequencing, GBFS, NVSD (no I/O).

Numba's on-disk cache keys a compiled kernel by its own source file only, so a kernel
would silently keep an old copy of a helper it calls (or inlines) from another module after
that module changes. Unless ``NUMBA_CACHE_DIR`` is set, the kernels are therefore cached in a
folder named after one hash of every source that holds kernels or their helpers
(``~/.cache/featurebudget/numba/<hash>``, :func:`kernel_sources`): this package, and the
service's modules that compile kernels (``service/_json.py`` inlines ``service/_swar.py``
and ``algorithms.sparse`` helpers). Changing any of them starts a fresh cache.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

# Sibling packages whose modules may hold kernels: read (never imported) for the cache key.
KERNEL_PACKAGES = ("service",)
_IMPORTS_NUMBA = re.compile(rb"^\s*(from numba\b|import numba\b)", re.MULTILINE)


def kernel_sources(root: Path | None = None) -> list[Path]:
    """The files the numba cache key hashes, sorted: every ``.py`` file of this package
    (``root``, default: its folder), and those of :data:`KERNEL_PACKAGES` next to it that
    import numba (what they compile is all they share with the cache)."""
    root = Path(__file__).resolve().parent if root is None else Path(root)
    sources = list(root.rglob("*.py"))
    for name in KERNEL_PACKAGES:
        sources += [path for path in (root.parent / name).rglob("*.py")
                    if _IMPORTS_NUMBA.search(path.read_bytes())]
    return sorted(sources)


def kernel_cache_key(root: Path | None = None) -> str:
    """Hex digest of the names and contents of :func:`kernel_sources`."""
    root = Path(__file__).resolve().parent if root is None else Path(root)
    digest = hashlib.blake2b(digest_size=8)
    for path in kernel_sources(root):
        digest.update(path.relative_to(root.parent).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _isolate_numba_cache() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "featurebudget" / "numba" / kernel_cache_key()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return          # numba falls back to __pycache__ next to the sources
    from numba.core import config

    config.CACHE_DIR = str(folder)


_isolate_numba_cache()
