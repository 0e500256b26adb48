"""The image, checked statically (no Docker engine runs on these machines): docker/Dockerfile
is multi-stage with no compiler in the final image, runs as a non-root user, copies every
package the wheel holds, and compiles the numba kernels at build time with `featurebudget
warmup`, which compiles every cached kernel that the service's Python code calls. (.ci/run
builds the wheel and serves it from a clean virtual environment, as the image does.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from service.cli import build_parser
from tests.support.processes import DOCKER, ROOT

DOCKERFILE = DOCKER / "Dockerfile"
COMPILERS = re.compile(r"\b(gcc|g\+\+|clang|build-essential|cc|make|gfortran|python3?-dev)\b")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    out, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        pending += " " + stripped.removesuffix("\\").strip()
        if not stripped.endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            out.append((keyword.upper(), arguments.strip()))
            pending = ""
    return out


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions():
        if keyword == "FROM":
            out.append([])
        out[-1].append((keyword, arguments))
    return out


def exec_form(arguments: str) -> list[str]:
    return json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)


def test_multi_stage_and_no_compiler_in_the_final_image():
    build, final = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    base = final[0][1].split()[0]
    assert re.fullmatch(r"python:3\.\d+-slim", base), base  # Debian slim: no compiler
    assert build[0][1].split()[-1] == "build"  # FROM ... AS build
    for keyword, arguments in final:
        if keyword == "RUN":
            assert not COMPILERS.search(arguments), arguments
            assert "pip install" not in arguments and "pip wheel" not in arguments, arguments
    # the final stage gets the installed environment from the build stage
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final
    # and the build stage compiles nothing either: binary wheels only
    installs = [a for k, a in build if k == "RUN" and "pip install" in a]
    assert installs and all("--only-binary=:all:" in a for a in installs)
    assert any("pip wheel --no-deps" in a for k, a in build if k == "RUN")


def test_runs_as_a_non_root_user():
    final = stages()[-1]
    users = [(i, a) for i, (k, a) in enumerate(final) if k == "USER"]
    assert users, "no USER in the final stage"
    index, user = users[-1]
    assert user not in ("root", "0") and not user.startswith("0:")
    created = [a for k, a in final[:index] if k == "RUN" and "useradd" in a]
    assert created and re.search(rf"\b{re.escape(user)}\b", created[0])
    assert re.search(rf"chown {re.escape(user)} /data", created[0])  # its data directory
    keywords = [k for k, _ in final]
    assert keywords.index("CMD") > index


def test_kernels_are_compiled_at_build_time_by_the_runtime_user():
    final = stages()[-1]
    keywords = [k for k, _ in final]
    warmups = [i for i, (k, a) in enumerate(final) if k == "RUN" and
               exec_form(a)[:2] == ["featurebudget", "warmup"]]
    assert len(warmups) == 1, "the final stage must run `featurebudget warmup`"
    warmup = warmups[0]
    assert max(i for i, k in enumerate(keywords) if k == "USER") < warmup  # cache owned by
    assert final.index(("COPY", "--from=build /opt/venv /opt/venv")) < warmup  # the user
    env = " ".join(a for k, a in final if k == "ENV")
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", env).group(1)
    assert re.search(rf"chown \S+ .*{re.escape(cache)}", " ".join(
        a for k, a in final if k == "RUN"))
    # portable cached code: generic CPU by default, so any host loads what the build compiled
    assert ("ARG", "NUMBA_CPU_NAME=generic") in final
    assert "NUMBA_CPU_NAME=${NUMBA_CPU_NAME}" in env


def test_copies_what_the_wheel_is_built_from_and_commands_parse():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    copied = {exec_form(a)[0] for k, a in stages()[0] if k == "COPY"}
    copied = {part for item in copied for part in item.split()}
    find = project["tool"]["setuptools"]["packages"]["find"]
    packages = {p.rstrip("*") for p in find["include"]}
    # each package's folder (under the first `where` root holding it) is copied itself or
    # inside a copied folder (featurebudget_client lives in clients/featurebudget-client)
    folders = {next(Path(root, name) for root in find.get("where", ["."])
                    if (ROOT / root / name).is_dir()) for name in packages}
    missing = {str(f) for f in folders
               if not any(part in copied for part in [str(f), *map(str, f.parents)])}
    assert not missing, missing
    sources = [a.split() for k, a in stages()[0] if k == "COPY"]
    for source in sources:
        for path in source[:-1]:
            assert (ROOT / path).exists(), path
    assert project["project"]["readme"] in {s for src in sources for s in src[:-1]}
    assert project["project"]["scripts"]["featurebudget"] == "service.cli:main"
    for keyword, arguments in stages()[-1]:
        if keyword in ("CMD", "ENTRYPOINT") or (keyword == "RUN" and
                                                arguments.startswith("featurebudget")):
            command = exec_form(arguments)
            assert command[0] == "featurebudget"
            build_parser().parse_args(command[1:])  # SystemExit (a test error) if not
    healthcheck = [a for k, a in stages()[-1] if k == "HEALTHCHECK"]
    assert healthcheck and "/healthz" in healthcheck[0]
    port = exec_form([a for k, a in stages()[-1] if k == "CMD"][0])
    assert port[port.index("--port") + 1] in healthcheck[0]


# Run in a fresh process: `featurebudget warmup`, then every numba dispatcher with an
# on-disk cache that a plain Python function or method of algorithms/ or service/ calls
# must have a compiled signature (else its first call would compile, in a container at its
# first request). Kernels called only from other kernels are compiled into them; the
# Python fallbacks of @overload functions and their templates are only used by kernels.
_CHECK = r'''
import importlib, inspect, json, pkgutil, types
from numba.core.registry import CPUDispatcher
from numba.core.typing.templates import builtin_registry
import algorithms, service
from service.cli import main

modules = [importlib.import_module(info.name) for pkg in (algorithms, service)
           for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
assert main(["warmup", "--quiet"]) == 0
overloaded = set()
for function, typ in builtin_registry.globals:
    overloaded.add(function)
    for template in getattr(typ, "templates", ()):
        overloaded.add(getattr(template, "_overload_func", None))

def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)

def called(function):
    scope = function.__globals__
    for code in codes(function.__code__):
        for name in code.co_names:
            target = scope.get(name)
            if isinstance(target, CPUDispatcher):
                yield target
            elif isinstance(target, types.ModuleType):
                for attribute in code.co_names:
                    value = target.__dict__.get(attribute)
                    if isinstance(value, CPUDispatcher):
                        yield value

def functions():
    for module in modules:
        for value in vars(module).values():
            if getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value):
                yield value
            elif inspect.isclass(value):
                for member in vars(value).values():
                    member = getattr(member, "__func__", member)
                    if isinstance(member, property):
                        yield from (f for f in (member.fget, member.fset) if f)
                    elif inspect.isfunction(member):
                        yield member

missing, checked = {}, set()
for function in functions():
    if function in overloaded:
        continue
    for dispatcher in called(function):
        if type(dispatcher._cache).__name__ == "NullCache":
            continue
        checked.add(dispatcher)
        if not dispatcher.signatures:
            name = f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__name__}"
            missing.setdefault(name, []).append(f"{function.__module__}.{function.__qualname__}")
print(json.dumps({"checked": len(checked), "missing": missing}))
'''


def test_warmup_compiles_every_kernel_python_calls():
    result = subprocess.run([sys.executable, "-c", _CHECK], cwd=ROOT, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-5000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["checked"] >= 20, report  # the check sees the kernels at all
    assert report["missing"] == {}, (
        "kernels `featurebudget warmup` leaves to compile at their first call (kernel: "
        f"its Python callers): {report['missing']}")


def dockerignored(path: str) -> bool:
    """Whether the build context leaves ``path`` out under the repository's .dockerignore
    (Docker's rules: the last matching line wins, ``!`` keeps, ``**`` spans folders, and a
    folder's rule covers what is inside it). O(lines x path depth)."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keep = line.startswith("!")
            pattern = line.lstrip("!").strip("/")
            regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
            regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
            rules.append((re.compile(regex), keep))
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for regex, keep in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = not keep
    return excluded


def test_build_context_carries_what_the_image_copies_and_nothing_heavy():
    sources = [path for k, a in stages()[0] if k == "COPY" for path in a.split()[:-1]]
    assert sources
    for source in sources:
        assert not dockerignored(source), f"{source} is copied but left out of the context"
        if (ROOT / source).is_dir():
            some = next(p for p in (ROOT / source).rglob("*.py"))
            assert not dockerignored(str(some.relative_to(ROOT))), some
    for heavy in (".venv", ".venv/lib/python3.11/site-packages/numpy/__init__.py", "data",
                  "data/models/spam.npz", ".git", ".git/HEAD", ".ci/venv", "benchmarks",
                  "benchmarks/results/run.json", "load_tests/results/soak.png",
                  "service/__pycache__/app.cpython-311.pyc", ".pytest_cache",
                  "featurebudget.egg-info", "algorithms/online/__pycache__/x.nbi", "tests"):
        assert dockerignored(heavy), heavy
