"""Cyclic garbage collection held off while a command starts.

Starting ``serve`` imports about a thousand modules. What they build lives as long as the process,
yet the cyclic collector walks all of it again each time it runs while they load: close to a tenth
of ``serve``'s start, for nothing to free. The command line holds collection off from its first
line (:func:`pause_collection`); every command resumes it before its own work
(:func:`resume_collection`), with what start-up built frozen out of later collections.
Reference counting frees everything else meanwhile, as always.
"""

from __future__ import annotations

import gc

__all__ = ["pause_collection", "resume_collection"]


def pause_collection() -> None:
    """Hold off cyclic collection (the command line's first step)."""
    gc.disable()


def resume_collection() -> None:
    """Collect cycles again, leaving what exists now (modules, the app) out of every collection."""
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()
