"""benchmarks/README.md's recorded figures are the rendering of the committed results, not hand edits.

The part between the README's markers must equal ``benchmarks/render.py`` applied to
``benchmarks/results/*.json`` (regenerate it with ``render.py --write``, see the README).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
README = BENCHMARKS / "README.md"
RESULTS = sorted((BENCHMARKS / "results").glob("*.json"))


def load_render() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_render", BENCHMARKS / "render.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = load_render()


def test_results_are_committed() -> None:
    assert RESULTS, "no benchmarks/results/*.json"
    for path in RESULTS:
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["rows"], f"{path.name} has no table rows"


def test_readme_figures_are_the_rendering_of_the_results() -> None:
    readme = README.read_text(encoding="utf-8")
    assert render.section_of(readme) == render.render(render.load(RESULTS)), (
        "benchmarks/README.md's generated figures differ from benchmarks/results/*.json: run "
        "`.venv/bin/python benchmarks/render.py --write benchmarks/README.md benchmarks/results/*.json`"
    )


def test_a_hand_edit_between_the_markers_is_caught(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    edited = readme.replace(render.END, "| a figure | typed by hand | | | PASS |\n" + render.END)
    assert render.section_of(edited) != render.render(render.load(RESULTS))
    copy = tmp_path / "README.md"
    copy.write_text(edited, encoding="utf-8")
    assert render.main(["--check", str(copy), *map(str, RESULTS)]) == 1
    assert render.main(["--write", str(copy), *map(str, RESULTS)]) == 0
    assert copy.read_text(encoding="utf-8") == readme


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all",
        f"{render.END}\n{render.BEGIN}",
        f"{render.BEGIN}\n{render.END}\n{render.BEGIN}\n{render.END}",
    ],
)
def test_missing_doubled_or_misordered_markers_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="marker"):
        render.section_of(text)
    with pytest.raises(ValueError, match="marker"):
        render.splice(text, "figures")
