"""Tests mirror ``src/``: a test file sits in the folder named after the package or top-level module
of ``mcp_approval`` it tests, and the root of ``tests/`` holds at most ten cross-cutting files
(the import graph, the public surface, the docs' links, packaging, ...)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "src" / "mcp_approval"
#: Test files the root may hold: only checks of the whole repository belong there.
ROOT_LIMIT = 10
#: Folders of tests that mirror no single package, and why.
NOT_MIRRORED = {
    "support": "the suite's own helpers (and the test of its fork server)",
    "treasury": "the treasury example deployment end to end, every layer at once",
    "product_page": "the product page's promises, each across several layers",
    "fuzz": "generated requests against a whole served deployment",
}


def test_the_root_holds_at_most_ten_test_files() -> None:
    at_root = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert len(at_root) <= ROOT_LIMIT, (
        f"{len(at_root)} test files at the root of tests/ (at most {ROOT_LIMIT}): {at_root}; "
        "a test of one package or module goes in tests/<its name>/"
    )


def test_every_test_folder_mirrors_a_package_or_module_of_the_source() -> None:
    folders = {path.parent for path in TESTS.rglob("test_*.py")} - {TESTS}
    stray = []
    for folder in sorted(folders):
        top = folder.relative_to(TESTS).parts[0]
        mirrored = (PACKAGE / top).is_dir() or (PACKAGE / f"{top}.py").is_file()
        if not mirrored and top not in NOT_MIRRORED:
            stray.append(str(folder.relative_to(TESTS)))
    assert stray == [], f"test folders named after nothing in src/mcp_approval/: {stray}"


def test_every_test_folder_is_a_package() -> None:
    """Test modules are imported as ``tests.<folder>.<module>``: several folders hold a module of one name."""
    folders = {path.parent for path in TESTS.rglob("test_*.py")}
    missing = sorted(
        str(folder.relative_to(TESTS.parent)) for folder in folders if not (folder / "__init__.py").is_file()
    )
    assert missing == [], f"test folders without __init__.py: {missing}"
