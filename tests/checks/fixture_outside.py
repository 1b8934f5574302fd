"""What an operator's decider and policy hook do for the SEP server, from the kit's command line.

``python fixture_outside.py BASE decide DECISION ARGUMENTS REVIEWER COMMENT`` decides the pending
request of the call with ARGUMENTS (JSON) and prints its backend id; it exits 75 (``EX_TEMPFAIL``)
when there is no such request. Without the four values it reads them from ``MCP_CHECK_DECISION``,
``MCP_CHECK_ARGUMENTS``, ``MCP_CHECK_REVIEWER`` and ``MCP_CHECK_COMMENT`` (as the suite module
passes them). ``python fixture_outside.py BASE policy ACTION TOKEN ARGUMENTS`` changes the
instance's policy. Standard library only, so each run costs little more than an
interpreter start. BASE is the instance's URL, ``http://127.0.0.1:PORT/i/ID``.
"""

import json
import os
import sys
import urllib.error
import urllib.request


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main() -> int:
    base, what = sys.argv[1], sys.argv[2]
    if what == "policy":
        action, token, arguments = sys.argv[3], sys.argv[4], json.loads(sys.argv[5] or "{}")
        post(f"{base}/policy", {"action": action, "token": token, "arguments": arguments})
        return 0
    if len(sys.argv) > 3:
        decision, arguments, reviewer, comment = sys.argv[3], json.loads(sys.argv[4]), sys.argv[5], sys.argv[6]
    else:
        env = os.environ
        decision, arguments = env["MCP_CHECK_DECISION"], json.loads(env["MCP_CHECK_ARGUMENTS"])
        reviewer, comment = env.get("MCP_CHECK_REVIEWER", ""), env.get("MCP_CHECK_COMMENT", "")
    body = {"decision": decision, "arguments": arguments, "reviewer": reviewer, "comment": comment}
    try:
        print(post(f"{base}/decide", body)["request"])
    except urllib.error.HTTPError as exc:
        print(f"{exc.code}: {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 75 if exc.code == 404 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
