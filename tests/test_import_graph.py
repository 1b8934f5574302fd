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

import pytest

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


# -- the layering --------------------------------------------------------------------------------
#
# Each layer lists the modules it holds (by prefix, after the package name). A module may import
# modules of its own layer and of the layers below it; an import of a layer above, or of a layer
# beside it on the same rung, is a forbidden edge. Rungs are listed bottom up.

Layer = tuple[str, tuple[str, ...]]
Rung = tuple[Layer, ...]

LAYERS: tuple[Rung, ...] = (
    (
        (
            "foundation",
            (
                *("_background", "_lazy", "_sdk", "clock", "crashpoints", "errors", "hosts", "json_shape"),
                *("keyring", "openapi", "protocol", "safe_text", "tracing", "worker_thread"),
            ),
        ),
    ),
    (("storage", ("storage",)),),
    (("tasks", ("tasks",)), ("web guards", ("web",))),
    (("denials", ("denials",)), ("policy", ("policy",))),
    (("backends", ("backends",)),),
    (("approval", ("approval",)), ("reviewers", ("reviewers",))),
    (("notify", ("notify",)),),
    (("metrics", ("metrics",)),),
    (("config", ("config",)),),
    (("composition", ("server",)), ("reference services", ("reference",))),
    (("testing", ("testing",)), ("demo", ("demo",)), ("conformance kit", ("checks",))),
    (("command line", ("cli", "__main__")),),
    (("package root", ("",)),),
)

# The agent side stands apart: it reads the wire models and nothing of the server side. The agent
# framework adapters belong to it (they build on the client).
CLIENT_LAYER: Layer = ("client", ("client", "agents"))
CLIENT_MAY_IMPORT = (
    *("client", "agents", "_lazy", "clock", "errors", "hosts", "protocol", "denials"),
    *("tasks.models", "tasks.states"),
)
# Below the client in the table of rungs: who may import the client.
CLIENT_IMPORTERS = ("demo", "cli", "")

# Inside the approval layer: the call's parts, the persistence, the engine, creation and the path
# without tasks are rooms with doors one way (see each subpackage's docstring). A call goes down:
# service -> without_tasks -> creation -> engine -> persistence, never back up.
APPROVAL_ROOMS: dict[str, tuple[str, ...]] = {
    "approval.call": (
        "approval.gate",
        "approval.service",
        "approval.creation",
        "approval.engine",
        "approval.without_tasks",
        "approval.persistence",
        "approval.results",
        "approval.tools",
        "approval.url_approval",
    ),
    "approval.persistence": (
        "approval.engine",
        "approval.without_tasks",
        "approval.service",
        "approval.creation",
        "approval.gate",
    ),
    "approval.engine": ("approval.service", "approval.creation", "approval.without_tasks", "approval.gate"),
    "approval.creation": ("approval.service", "approval.without_tasks"),
    "approval.without_tasks": ("approval.service", "approval.engine"),
}

# Packages only their own layer reaches into: the package, the prefixes of the modules that may
# import any of its modules, and the modules open to every layer that may import it (importing one
# runs the package's ``__init__``, which is no more than a docstring). The local backend's modules
# are reached through ``backends``' public names; its tables and their history are its schema's.
PRIVATE_PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "backends.local": (("backends",), ("backends.local.schema",)),
}

# Layers that may import a lower one only through some of its modules: the importer, the layer, and
# the modules open to it. Notifications and metrics read the approval workflows through the layer's
# read API, never its tables or its store.
ONLY_THROUGH: dict[str, tuple[str, tuple[str, ...]]] = {
    "notify": ("approval", ("approval.persistence.outcomes",)),
    "metrics": ("approval", ("approval.persistence.outcomes",)),
}


def _matches(relative: str, prefix: str) -> bool:
    """``relative`` is the module ``prefix`` or inside it (the empty prefix: the package root alone)."""
    if prefix == "":
        return relative == ""
    return relative == prefix or relative.startswith(prefix + ".")


def _relative(module: str, package: str) -> str:
    return "" if module == package else module.removeprefix(package + ".")


def _place(relative: str, rungs: tuple[Rung, ...]) -> tuple[int, str] | None:
    """The rung and layer name of a module (the longest matching prefix wins), or ``None``."""
    best: tuple[int, int, str] | None = None
    for rung_index, rung in enumerate(rungs):
        for name, prefixes in rung:
            for prefix in prefixes:
                if _matches(relative, prefix) and (best is None or len(prefix) > best[1]):
                    best = (rung_index, len(prefix), name)
    return None if best is None else (best[0], best[2])


def _allowed(target: str, prefixes: tuple[str, ...]) -> bool:
    """``target`` is under one of ``prefixes``, or is a package above one (importing it runs that ``__init__``)."""
    return any(_matches(target, p) or p.startswith(target + ".") for p in prefixes)


def _rung_violation(source: str, target: str, rungs: tuple[Rung, ...]) -> str | None:
    here, there = _place(source, rungs), _place(target, rungs)
    if here is None or there is None:
        return "a module in no layer"
    if there[0] > here[0]:
        return f"{here[1]} imports {there[1]}, a layer above it"
    if there[0] == here[0] and there[1] != here[1]:
        return f"{here[1]} imports {there[1]}, beside it"
    return None


def _private_violation(
    source: str, target: str, private: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
) -> str | None:
    for package, (insiders, doors) in private.items():
        if _matches(target, package) and not _allowed(source, insiders) and not _allowed(target, doors):
            return f"{source or 'the root'} reaches into {package}, which only {', '.join(insiders)} may"
    return None


def _narrow_violation(source: str, target: str, only_through: Mapping[str, tuple[str, tuple[str, ...]]]) -> str | None:
    for importer, (layer, doors) in only_through.items():
        if _matches(source, importer) and _matches(target, layer) and not _allowed(target, doors):
            return f"{source} may import {layer} only through {', '.join(doors)}"
    return None


def layer_violations(
    graph: Graph,
    package: str,
    rungs: tuple[Rung, ...],
    *,
    side: tuple[Layer, tuple[str, ...], tuple[str, ...]] | None = None,
    rooms: Mapping[str, tuple[str, ...]] | None = None,
    private: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    only_through: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
) -> list[str]:
    """Every forbidden edge of ``graph``, as ``importer -> imported (why)``.

    ``side``: a layer outside the rungs, the prefixes it may import, and the prefixes of the
    modules that may import it. ``rooms``: a prefix and the prefixes its modules may not import.
    ``private``: a package, the prefixes that may import any of its modules, and its modules
    open to the others. ``only_through``: a prefix, a layer, and the only modules of that layer
    its modules may import.
    """
    (side_name, side_prefixes), side_may, side_importers = side or (("", ()), (), ())
    found: list[str] = []
    for importer in sorted(graph):
        source = _relative(importer, package)
        for imported in sorted(graph[importer]):
            target = _relative(imported, package)
            if _allowed(source, side_prefixes) and side_prefixes:
                why = None if _allowed(target, side_may) else f"{side_name} imports outside what it may"
            elif any(_matches(target, p) for p in side_prefixes):
                why = None if _allowed(source, side_importers) else f"{side_name} imported from {source or 'the root'}"
            else:
                why = _rung_violation(source, target, rungs)
            closed = [door for room, doors in (rooms or {}).items() if _matches(source, room) for door in doors]
            if why is None and any(_matches(target, door) for door in closed):
                why = f"{source} may not import {target}"
            if why is None:
                why = _private_violation(source, target, private or {})
            if why is None:
                why = _narrow_violation(source, target, only_through or {})
            if why is not None:
                found.append(f"{importer} -> {imported} ({why})")
    return found


def test_no_layer_imports_a_layer_above_it() -> None:
    graph = import_graph(SOURCE, PACKAGE)
    side = (CLIENT_LAYER, CLIENT_MAY_IMPORT, CLIENT_IMPORTERS)
    violations = layer_violations(
        graph, PACKAGE, LAYERS, side=side, rooms=APPROVAL_ROOMS, private=PRIVATE_PACKAGES, only_through=ONLY_THROUGH
    )
    assert violations == [], "forbidden imports:\n" + "\n".join(violations)


def test_the_layer_check_finds_each_kind_of_forbidden_edge(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "import os\n",
            "pkg/low/__init__.py": "",
            "pkg/low/rows.py": "from pkg import base\nfrom pkg.low.inner import impl\n",  # an insider reaches in
            # A private package of ``low``: only its schema is open to the layers above.
            "pkg/low/inner/__init__.py": "",
            "pkg/low/inner/impl.py": "from pkg import base\n",
            "pkg/low/inner/schema.py": "import os\n",
            # A lower layer reaching up (deferred into a function: still an edge).
            "pkg/low/leak.py": "def later():\n    from pkg.high import app\n",
            "pkg/left.py": "from pkg import right\n",  # beside it on the same rung
            "pkg/right.py": "from pkg.low import rows\n",
            "pkg/high/__init__.py": "",
            # The side layer imported; the private package's open module.
            "pkg/high/app.py": "from pkg.low import rows\nfrom pkg import agent\nfrom pkg.low.inner import schema\n",
            "pkg/high/engine.py": "from pkg.high import app\n",  # a closed door inside a layer
            "pkg/high/peek.py": "from pkg.low.inner import impl\n",  # into a private package
            # ``top`` may import ``low`` only through ``low.rows``: not even the private package's schema.
            "pkg/top.py": "from pkg.low import rows\nfrom pkg.low.inner import schema\n",
            "pkg/agent.py": "from pkg.low import rows\n",  # the side layer reaching outside
            "pkg/stray.py": "",
            "pkg/uses_stray.py": "from pkg import stray\n",
        },
    )
    rungs: tuple[Rung, ...] = (
        (("base", ("base",)),),
        (("low", ("low",)),),
        (("left", ("left",)), ("right", ("right",))),
        (("high", ("high", "uses_stray")),),
        (("top", ("top",)),),
        (("root", ("",)),),
    )
    side = (("agent", ("agent",)), ("agent", "base"), ("",))

    def violations() -> list[str]:
        return layer_violations(
            import_graph(tmp_path, "pkg"),
            "pkg",
            rungs,
            side=side,
            rooms={"high.engine": ("high.app",)},
            private={"low.inner": (("low",), ("low.inner.schema",))},
            only_through={"top": ("low", ("low.rows",))},
        )

    assert violations() == [
        "pkg.agent -> pkg.low (agent imports outside what it may)",
        "pkg.agent -> pkg.low.rows (agent imports outside what it may)",
        "pkg.high.app -> pkg.agent (agent imported from high.app)",
        "pkg.high.engine -> pkg.high.app (high.engine may not import high.app)",
        "pkg.high.peek -> pkg.low.inner.impl (high.peek reaches into low.inner, which only low may)",
        "pkg.left -> pkg.right (left imports right, beside it)",
        "pkg.low.leak -> pkg.high (low imports high, a layer above it)",
        "pkg.low.leak -> pkg.high.app (low imports high, a layer above it)",
        "pkg.top -> pkg.low.inner (top may import low only through low.rows)",
        "pkg.top -> pkg.low.inner.schema (top may import low only through low.rows)",
        "pkg.uses_stray -> pkg.stray (a module in no layer)",
    ]
    # Without the wrong edges, the same layers hold.
    for name in ("low/leak.py", "left.py", "high/engine.py", "high/peek.py", "agent.py", "uses_stray.py"):
        (tmp_path / "pkg" / name).unlink()
    (tmp_path / "pkg" / "high" / "app.py").write_text(
        "from pkg.low import rows\nfrom pkg.low.inner import schema\n", encoding="utf-8"
    )
    (tmp_path / "pkg" / "top.py").write_text("from pkg.low import rows\n", encoding="utf-8")
    assert violations() == []


def test_the_table_forbids_reaching_into_the_local_backend_and_the_approval_tables(tmp_path: Path) -> None:
    """The rules of this file's own table, on a package laid out like this one: each new wrong edge fails."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/backends/__init__.py": "",
            "pkg/backends/capabilities.py": "from pkg.backends.local import records\n",  # inside backends: fine
            "pkg/backends/local/__init__.py": "",
            "pkg/backends/local/records.py": "",
            "pkg/backends/local/schema.py": "",
            "pkg/approval/__init__.py": "",
            "pkg/approval/persistence/__init__.py": "",
            "pkg/approval/persistence/schema.py": "",
            "pkg/approval/persistence/outcomes.py": "from pkg.approval.persistence import schema\n",
            "pkg/reviewers/__init__.py": "",
            # The open schema, then a module of the local backend's package.
            "pkg/reviewers/views.py": "from pkg.backends.local import schema\nfrom pkg.backends.local import records\n",
            "pkg/notify/__init__.py": "",
            "pkg/notify/messages.py": (
                "from pkg.approval.persistence import outcomes\nfrom pkg.approval.persistence.schema import t\n"
            ),
            "pkg/metrics/__init__.py": "",
            "pkg/metrics/endpoint.py": "from pkg.approval.persistence.schema import t\n",
        },
    )
    violations = layer_violations(
        import_graph(tmp_path, "pkg"), "pkg", LAYERS, private=PRIVATE_PACKAGES, only_through=ONLY_THROUGH
    )
    assert violations == [
        "pkg.metrics.endpoint -> pkg.approval.persistence.schema"
        " (metrics.endpoint may import approval only through approval.persistence.outcomes)",
        "pkg.notify.messages -> pkg.approval.persistence.schema"
        " (notify.messages may import approval only through approval.persistence.outcomes)",
        "pkg.reviewers.views -> pkg.backends.local.records"
        " (reviewers.views reaches into backends.local, which only backends may)",
    ]


def test_each_approval_room_refuses_a_wrong_edge_through_each_closed_door() -> None:
    graph = import_graph(SOURCE, PACKAGE)
    side = (CLIENT_LAYER, CLIENT_MAY_IMPORT, CLIENT_IMPORTERS)
    for room, doors in APPROVAL_ROOMS.items():
        inside = sorted(name for name in graph if _matches(_relative(name, PACKAGE), room))
        assert inside, f"no module in {room}"
        for door in doors:
            target = sorted(name for name in graph if _matches(_relative(name, PACKAGE), door))[-1]
            wrong = {**graph, inside[-1]: graph[inside[-1]] | {target}}
            found = layer_violations(wrong, PACKAGE, LAYERS, side=side, rooms=APPROVAL_ROOMS)
            assert f"{inside[-1]} -> {target} ({_relative(inside[-1], PACKAGE)} may not import " in "\n".join(found)


def test_the_conformance_kit_imports_nothing_but_itself_and_the_foundation() -> None:
    """The kit is a black-box client of the server it checks: beside itself it may import rung 0 only."""
    graph = import_graph(SOURCE, PACKAGE)
    (_, foundation), *_ = LAYERS[0]

    def allowed(target: str) -> bool:
        relative = _relative(target, PACKAGE)
        return _matches(relative, "checks") or any(_matches(relative, prefix) for prefix in foundation)

    reaching = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _matches(_relative(module, PACKAGE), "checks")
        for target in targets
        if not allowed(target)
    )
    assert reaching == [], "the conformance kit imports beyond the foundation:\n" + "\n".join(reaching)


@pytest.fixture(scope="module")
def package_graph() -> Graph:
    return import_graph(SOURCE, PACKAGE)


@pytest.mark.parametrize(
    ("importer", "imported", "why"),
    [
        # The HTTP guards sit on storage, beside the tasks runtime: neither may import them.
        ("storage.worker_guards", "web.throttle", "storage imports web guards, a layer above it"),
        ("tasks.server", "web.bodies", "tasks imports web guards, beside it"),
        ("web.proxies", "reviewers.console", "web guards imports reviewers, a layer above it"),
        # The helpers of rung 0 import nothing of the package above rung 0.
        ("keyring", "approval.binding", "foundation imports approval, a layer above it"),
        ("errors", "storage.database", "foundation imports storage, a layer above it"),
        ("worker_thread", "tasks.runtime", "foundation imports tasks, a layer above it"),
        ("json_shape", "web.bodies", "foundation imports web guards, a layer above it"),
        ("_sdk", "approval.tools", "foundation imports approval, a layer above it"),
        # The agent side may take the exception root, not the key ring.
        ("client.tasks", "keyring", "client imports outside what it may"),
    ],
)
def test_the_table_refuses_a_wrong_edge_into_and_out_of_each_new_module(
    package_graph: Graph, importer: str, imported: str, why: str
) -> None:
    graph = package_graph
    source, target = f"{PACKAGE}.{importer}", f"{PACKAGE}.{imported}"
    assert source in graph, "a module of the table was not found"
    assert target in graph, "a module of the table was not found"
    side = (CLIENT_LAYER, CLIENT_MAY_IMPORT, CLIENT_IMPORTERS)
    wrong = {**graph, source: graph[source] | {target}}
    found = layer_violations(wrong, PACKAGE, LAYERS, side=side, rooms=APPROVAL_ROOMS)
    assert f"{source} -> {target} ({why})" in found
    assert f"{source} -> {target}" not in "\n".join(layer_violations(graph, PACKAGE, LAYERS, side=side))
