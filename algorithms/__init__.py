"""featurebudget numerics: online learners, anytime sequencing, GBFS, NVSD (no I/O).

Numba's on-disk cache keys a compiled kernel by its own source file only, so a kernel
would silently keep an old copy of a helper it calls from another module after that module
changes. Unless ``NUMBA_CACHE_DIR`` is set, the kernels are therefore cached in a folder
named after a hash of this package's sources (``~/.cache/featurebudget/numba/<hash>``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def _isolate_numba_cache() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    root = Path(__file__).resolve().parent
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "featurebudget" / "numba" / digest.hexdigest()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return          # numba falls back to __pycache__ next to the sources
    from numba.core import config

    config.CACHE_DIR = str(folder)


_isolate_numba_cache()
