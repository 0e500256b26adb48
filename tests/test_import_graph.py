"""No import circles in ``algorithms/``, ``service/`` and ``clients/``.

The check reads every module's source (AST, nothing is imported) and collects every
import it names, at module level and inside functions alike. A circle is a set of modules
that reach one another through those imports (a strongly connected component of more than
one module, or a module that imports itself). Each circle found is printed, one line each.

``from package import name`` counts as importing ``package.name`` when that is a module of
the project, else ``package``; a parent package is not counted as imported by its
submodules (its ``__init__`` runs first, but it is not a dependency the code chose).

A string that names a project module, ``"package.module"`` or ``"package.module:attribute"``
(what ``importlib.import_module`` and factory tables are given), counts as an import of that
module too: a circle hidden behind a string is still a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("algorithms", "service", "clients")

# Circles whose removal is in progress elsewhere, named module by module: a circle passes
# only when every module in it is listed here, so any new circle still fails the test.
ALLOWED: frozenset[str] = frozenset()

# "package.module" or "package.module:attribute", the whole string
_NAMED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
                    r"(?::[A-Za-z_][A-Za-z0-9_.]*)?$")


def module_names() -> dict[str, Path]:
    """Every module of the project's packages, dotted name -> file."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``module`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.add(child if child in modules else base)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and _NAMED.match(node.value)):
            targets.add(node.value.partition(":")[0])
    out = set()
    for target in targets:
        while target and target not in modules:  # `import a.b.c` of a name inside a.b
            target = target.rpartition(".")[0]
        if target:
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a self-import),
    sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return sorted(found)


def test_the_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"], ["e"]]


def test_the_graph_reads_function_level_and_relative_imports():
    graph = import_graph()
    assert {"service.settings", "service.startup"} <= graph["service.app"]  # in a function
    assert "service.cli.parser" in graph["service.cli"]
    assert set(graph) >= {"service.app", "clients", "algorithms.states"}


def test_the_graph_follows_modules_named_in_strings(tmp_path):
    modules = module_names()
    source = tmp_path / "table.py"
    source.write_text('ROWS = {"file": "service.storage.local:open_url"}\n'
                      'MODULE = "service.settings"\n'
                      '"""A docstring naming service.storage.local is no import."""\n')
    assert imports_of("service.table", source, modules) == {"service.storage.local",
                                                            "service.settings"}


def test_no_module_imports_one_that_imports_it_back():
    found = circles(import_graph())
    for circle in found:
        print("import circle:", " -> ".join(circle))
    new = [circle for circle in found if not set(circle) <= ALLOWED]
    assert not new, f"{len(new)} import circle(s): " + "; ".join(" <-> ".join(c) for c in new)
