"""No import cycle inside the package: its modules form a layered graph.

The graph is read from the source (``ast``), nothing is imported. What counts as an edge:

- every import, wherever it is: at module level, under ``if TYPE_CHECKING:``, and inside
  functions. A cycle that only type checking sees is still two modules that each need the
  other, and the next runtime import along it fails; an import deferred into a function (the
  CLI's subcommands, the optional Redis store) changes when a module loads, not which modules
  depend on which;
- ``from pkg import name`` points at the module ``pkg.name`` when that is a module, else at
  ``pkg`` itself (its ``__init__``, which re-exports ``name``): importing a re-exported name
  runs the package's ``__init__`` and everything it imports;
- importing ``a.b.c`` from outside the package ``a.b`` also runs ``a.b``'s ``__init__``, so it
  points at ``a.b`` too (a module inside ``a.b`` does not: the package is already importing).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "mcp_approval"

Graph = dict[str, set[str]]


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package by its own name)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _with_packages(target: str, importer: str, modules: Mapping[str, Path]) -> set[str]:
    """``target`` and the packages above it whose ``__init__`` the import runs (those not holding ``importer``)."""
    found = {target}
    parts = target.split(".")
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        if package in modules and not (importer == package or importer.startswith(package + ".")):
            found.add(package)
    return found


def import_graph(root: Path, package: str) -> Graph:
    """The package's modules and, for each, the modules of the package its loading imports."""
    modules = module_names(root, package)
    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _absolute(node, name, is_package)
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.append(submodule if submodule in modules else source)
            for target in targets:
                if target in modules:
                    graph[name] |= _with_packages(target, name, modules) - {name}
    return graph


def _components(graph: Graph) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative) with more than one module, or a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def _cycle_through(graph: Graph, component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module, as a path that returns to it."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for successor in sorted(graph[node] & members):
                if successor == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = previous[node]
                    return [start, *reversed(path[1:]), start]
                if successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {component}")


def import_cycles(graph: Graph) -> list[list[str]]:
    """One cycle per group of modules that import each other (empty when the graph is layered)."""
    return [_cycle_through(graph, component) for component in _components(graph)]


def describe(cycles: list[list[str]]) -> str:
    return "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(SOURCE, PACKAGE)
    assert len(graph) > 50, "the source tree was not found"
    cycles = import_cycles(graph)
    assert not cycles, f"import cycles in {PACKAGE}:\n{describe(cycles)}"


def names_used(path: Path) -> set[str]:
    """Every name a module's code uses: imported, read, or reached as an attribute (not in docstrings)."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.update((node.name.rsplit(".", 1)[-1], node.asname or ""))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            used.add(node.value)  # a quoted annotation
    return used


def test_only_the_composition_knows_tool_approval() -> None:
    """The workflow's parts get their collaborators passed in; none reaches back into ``ToolApproval``."""
    composition = {f"{PACKAGE}.approval", f"{PACKAGE}.approval.service"}
    modules = module_names(SOURCE, PACKAGE)
    parts = {name: path for name, path in modules.items() if name.startswith(f"{PACKAGE}.approval.")}
    assert len(parts) > 10, "the approval package was not found"
    knowing = sorted(
        name for name, path in parts.items() if name not in composition and "ToolApproval" in names_used(path)
    )
    assert knowing == []
    graph = import_graph(SOURCE, PACKAGE)
    importing = sorted(
        name for name in parts if f"{PACKAGE}.approval.service" in graph[name] and name not in composition
    )
    assert importing == []


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_finds_cycles_of_every_kind_it_counts(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            # A cycle that only type checking sees, with a relative import.
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "from .a import A\n",
            # A re-export: importing ``sub``'s name runs ``sub/__init__``, which imports ``c``.
            "pkg/sub/__init__.py": "from pkg.sub.impl import Thing\n",
            "pkg/sub/impl.py": "import pkg.c\n",
            "pkg/c.py": "from pkg.sub import Thing\n",
            # An import deferred into a function closes a cycle all the same.
            "pkg/d.py": "import pkg.e\n",
            "pkg/e.py": "def later():\n    from pkg import d\n",
            # A layered pair is no cycle.
            "pkg/f.py": "import pkg.g\n",
            "pkg/g.py": "import os\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.impl"] == {"pkg.c"}  # inside ``pkg.sub``: no edge to its own ``__init__``
    assert describe(import_cycles(graph)) == "\n".join(
        ["pkg.a -> pkg.b -> pkg.a", "pkg.c -> pkg.sub -> pkg.sub.impl -> pkg.c", "pkg.d -> pkg.e -> pkg.d"]
    )


def test_a_layered_package_has_no_cycle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.top import run\n",
            "pkg/top.py": "from pkg import low\nfrom pkg.mid import helper\n",
            "pkg/mid.py": "from . import low\n",
            "pkg/low.py": "import os\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.top"] == {"pkg.low", "pkg.mid"}
    assert import_cycles(graph) == []
