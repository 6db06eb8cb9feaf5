#!/usr/bin/env bash
# The README's first command: set up (Python venv, anarchon) and run the quick start.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
setup_venv ""
exec "$VENV/bin/python" "$ROOT/examples/quick_start.py" "$@"
