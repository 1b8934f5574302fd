"""SEP-2643 tests: the ``sep_check`` marker ties a test to rows of ``conformance/sep-2643.yaml``.

``@pytest.mark.sep_check("sep-2643-...", ...)`` adds one ``sep-check`` property per id to the
test's JUnit XML record; ``scripts/sep_matrix.py`` reads those back.
"""

from __future__ import annotations

import pytest

#: The JUnit XML property name under which a test reports the check ids it covers.
CHECK_PROPERTY = "sep-check"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sep_check(*ids): the SEP conformance check ids this test covers")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in item.iter_markers("sep_check"):
            if not marker.args or not all(isinstance(arg, str) and arg for arg in marker.args):
                raise pytest.UsageError(f"{item.nodeid}: sep_check needs one or more non-empty id strings")
            item.user_properties.extend((CHECK_PROPERTY, check) for check in marker.args)
