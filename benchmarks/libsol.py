"""LIBSOL (github.com/LIBOL/SOL, the SOFS authors' C++ library) as a peer in the same run.

LIBSOL is not a Python package: build it once, then point ``benchmarks/online.py --libsol``
at the checkout (``build/bin`` must hold ``libsol.so`` and ``converter``)::

    git clone https://github.com/LIBOL/SOL && cd SOL && mkdir build && cd build
    cmake .. -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-march=native && make -j2

The data goes through LIBSOL's own converter into its binary format, and
``libsol_harness.cc`` (compiled here against the build) times ``Model::Train`` on
mini-batches decoded beforehand, so that its seconds are learning alone, as ours are.
Accuracy: LIBSOL's PET (hinge) and SOFS are tuned per B over the same grid on the same
validation split as ours (its FOFS is O(d) per update, seconds a fit: timed only).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from algorithms.sparse.libsvm import write_libsvm

HARNESS_SOURCE = Path(__file__).resolve().parent / "libsol_harness.cc"
ALGORITHMS = {"ogd": "ogd", "arow": "arow", "sofs": "sofs", "fofs": "fofs",
              "pet-hinge": "pet"}   # LIBSOL's PET is the hinge variant; it has no perceptron PET
TUNED = ["pet-hinge", "sofs"]
PARAMETER_NAMES = {"eta": "eta", "power_t": "power_t", "r": "r", "lam": "lambda"}


@dataclass(frozen=True)
class Libsol:
    """The compiled harness and the data files, by split name: fit and valid (the tuning
    split of train), train and test."""
    harness: Path
    files: dict[str, Path]

    def run(self, variant: str, budget: int | None, params: dict, train: str = "train",
            test: str = "test") -> tuple[float, float]:
        """(learning seconds, accuracy on ``test``) of one fresh LIBSOL model, one pass over
        ``train``; hyperparameters by our names (those LIBSOL has)."""
        settings = {PARAMETER_NAMES[name]: value for name, value in params.items()
                    if name in PARAMETER_NAMES}
        if budget is not None:
            settings["B"] = budget
        spec = ";".join(f"{name}={value}" for name, value in settings.items())
        done = subprocess.run([str(self.harness), ALGORITHMS[variant], spec,
                               str(self.files[train]), str(self.files[test])],
                              capture_output=True, text=True, check=True)
        found = re.search(r"seconds (\S+) train_accuracy \S+ test_accuracy (\S+)", done.stdout)
        if found is None:
            raise RuntimeError(f"libsol_harness printed no timing: {done.stdout[-500:]!r}")
        return float(found.group(1)), float(found.group(2))

    def tune_and_test(self, variant: str, budget: int | None,
                      grid: list[dict]) -> tuple[dict, float, float]:
        """(params, validation accuracy, test accuracy): the grid point best on the
        validation split (the first of equals, as ours), refit on train and tested."""
        scored = [(self.run(variant, budget, params, "fit", "valid")[1], params)
                  for params in grid]
        valid_accuracy, params = max(scored, key=lambda item: item[0])
        return params, valid_accuracy, self.run(variant, budget, params)[1]


def prepare(checkout: Path, workdir: Path, splits: dict) -> Libsol:
    """Compile the harness against the LIBSOL build in ``checkout`` and write each split
    (name -> (CSR batch, labels)) in LIBSOL's binary format, through libsvm text with 9
    significant digits (LIBSOL reads float32)."""
    build = checkout / "build" / "bin"
    for needed in (build / "libsol.so", build / "converter"):
        if not needed.exists():
            raise FileNotFoundError(f"{needed} is missing: build LIBSOL first (see "
                                    "benchmarks/libsol.py)")
    harness = workdir / "libsol_harness"
    subprocess.run(["g++", "-O3", "-march=native", "-std=c++11", "-pthread", "-DUSE_PTHREAD",
                    f"-I{checkout / 'include'}", f"-I{checkout / 'external'}",
                    str(HARNESS_SOURCE), f"-L{build}", "-lsol", f"-Wl,-rpath,{build}",
                    "-o", str(harness)], check=True)
    files = {}
    for name, (batch, labels) in splits.items():
        text, binary = workdir / f"libsol_{name}.svm", workdir / f"libsol_{name}.bin"
        write_libsvm(text, batch, labels, precision=9)
        subprocess.run([str(build / "converter"), "-i", str(text), "-s", "svm",
                        "-o", str(binary), "-d", "bin"], check=True, capture_output=True)
        text.unlink()
        files[name] = binary
    return Libsol(harness, files)
