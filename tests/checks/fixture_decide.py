"""The fixture server's out-of-band decider: ``python fixture_decide.py BASE_URL DECISION ARGUMENTS_JSON``.

Prints the backend request id it decided (the kit checks that id never reaches the client);
exits 75 (``EX_TEMPFAIL``: try again) when there is no pending request for those arguments.
Standard library only, so each decision costs little more than an interpreter start.
"""

import json
import os
import sys
import urllib.error
import urllib.request

# The suite's time scale, inherited from the test that runs this (tests/support/timing.py; not
# imported: this file runs as a plain script).
TIMEOUT_S = 30 * float(os.environ.get("MCP_APPROVAL_TEST_TIME_SCALE") or 1)


def main() -> int:
    base, decision, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    body = json.dumps({"decision": decision, "arguments": arguments}).encode()
    request = urllib.request.Request(f"{base}/decide", data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            print(json.loads(response.read())["request"])
    except urllib.error.HTTPError as exc:
        print(f"{exc.code}: {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 75 if exc.code == 404 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
