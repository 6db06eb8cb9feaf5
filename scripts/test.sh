#!/usr/bin/env bash
# The README's second command: set up, start every server the tests need, run all tests.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not slow").
set -euo pipefail
source "$(dirname "$0")/setup.sh"
setup_venv "dev,redis,valkey,postgres"
cd "$ROOT"

ENV_FILE="$ROOT/.servers.env"
"$VENV/bin/python" scripts/servers.py start --cluster --env-file "$ENV_FILE"
trap '"$VENV/bin/python" scripts/servers.py stop --env-file "$ENV_FILE"' EXIT
set -a
# shellcheck disable=SC1090
source "$ENV_FILE"
set +a

"$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
