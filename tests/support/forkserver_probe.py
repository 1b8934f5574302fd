"""``python -m tests.support.forkserver_probe MODE``: what the fork server's tests start.

Prints its pid, working directory and ``PROBE`` variable, then by ``MODE``: an integer exits with
that code, ``sleep`` waits to be signalled, ``crash`` passes the ``after_intent`` crash point
(printing ``survived`` if it is not armed).
"""

from __future__ import annotations

import os
import sys
import time

from mcp_approval.crashpoints import crash_point

if __name__ == "__main__":
    print(f"pid={os.getpid()} cwd={os.getcwd()} probe={os.environ.get('PROBE')}", flush=True)
    mode = sys.argv[1]
    if mode == "sleep":
        while True:
            time.sleep(60)
    if mode == "crash":
        crash_point("after_intent")
        print("survived", flush=True)
        sys.exit(0)
    sys.exit(int(mode))
