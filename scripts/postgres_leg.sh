#!/usr/bin/env bash
# The PostgreSQL leg: the tests whose deployments use the default store (a SQLite file) run again
# with a PostgreSQL database each (MCP_APPROVAL_TEST_STORE=postgresql, tests/support/store_leg.py).
# Tests already parametrized over both stores (ids "sqlite"/"postgres") and tests that read the
# SQLite file itself (marker sqlite_store) are left out. Extra arguments go to pytest.
# MCP_APPROVAL_LEG_TESTS (paths, space-separated) runs the leg over those instead of its whole list
# (the load step runs a selection this way).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export MCP_APPROVAL_TEST_STORE=postgresql
readonly LEG=(
  tests/treasury tests/approval tests/reviewers tests/product_page tests/client
  tests/config/test_docs_approval_link.py tests/config/test_options_secrets.py tests/notify/test_notification_docs.py
  tests/server/test_startup_validation.py tests/server/test_approvals.py tests/server/test_library_validation.py
)
read -r -a selected <<<"${MCP_APPROVAL_LEG_TESTS:-${LEG[*]}}"
exec bash scripts/test -m "not sqlite_store" -k "not sqlite and not postgres" "${selected[@]}" "$@"
