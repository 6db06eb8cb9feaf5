#!/usr/bin/env bash
# The README's second command: set up, start every server the tests need, run all tests.
# With arguments, they go to one pytest run (e.g. scripts/test.sh -m "not slow" tests/unit).
#
#   scripts/test.sh --setup-only        install everything the suite needs (venv, servers,
#                                       tools, Chromium) and stop: the only step that needs
#                                       the package registries
#   ANARCHON_SKIP_SETUP=1 scripts/test.sh ...
#                                       use what is installed; no registry is asked (CI runs
#                                       it so in a network namespace with only loopback)
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$ROOT"

install_browser() {
    # The Django admin's real-browser test drives Debian's Chromium (as root on Debian only).
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
       ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
        echo "[test] installing chromium and chromium-driver" >&2
        apt-get update -qq >&2 && apt-get install -y -qq chromium chromium-driver >&2
    fi
}

if [ "${1:-}" = "--setup-only" ]; then
    setup_venv "dev,all,docs"
    install_browser
    exec "$VENV/bin/python" scripts/servers.py install --cluster
fi
if [ -z "${ANARCHON_SKIP_SETUP:-}" ]; then
    setup_venv "dev,all,docs"
    install_browser
fi

ENV_FILE="$ROOT/.servers.env"
"$VENV/bin/python" scripts/servers.py start --cluster --env-file "$ENV_FILE"
trap '"$VENV/bin/python" scripts/servers.py stop --env-file "$ENV_FILE"' EXIT
set -a
# shellcheck disable=SC1090
source "$ENV_FILE"
set +a

PYTEST=("$VENV/bin/python" -m pytest -p no:cacheprovider -rs)
if [ "$#" -gt 0 ]; then
    "${PYTEST[@]}" "$@"
    exit
fi
# Tests that do not start processes or read real clocks are independent (each isolates
# itself in its own namespace), so they run on two workers; the `slow` ones (clusters,
# faults, real clocks) run one at a time so their timings are not squeezed. Django's test
# settings configure the process: its suite runs in a pytest of its own.
status=0
"${PYTEST[@]}" -n 2 -m "not slow" --ignore=tests/frameworks/django tests || status=$?
"${PYTEST[@]}" -m slow --ignore=tests/frameworks/django tests || status=$?
"${PYTEST[@]}" tests/frameworks/django || status=$?
exit "$status"
