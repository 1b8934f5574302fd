"""Names a package offers without importing them until first use (PEP 562 module ``__getattr__``).

A package whose ``__init__`` would otherwise import its heaviest modules (the approval engine, the
server composition) lists its public names here instead, so that importing one of its light
modules, or the package for a constant, stays cheap.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    package: str, names: Mapping[str, str], *, moved: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``.

    Args:
        package: the package's ``__name__`` (for the error messages).
        names: public name → the module that defines it, imported on first access.
        moved: old name → the module it now lives in; access still works, with a ``DeprecationWarning``.
    """
    moved = dict(moved or {})

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None and name in moved:
            module = moved[name]
            warnings.warn(f"import {name} from {module}, not {package}", DeprecationWarning, stacklevel=2)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        if name in names:
            vars(import_module(package))[name] = value  # later accesses skip this function
        return value

    return __getattr__
