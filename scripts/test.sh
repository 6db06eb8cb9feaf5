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
#   ANARCHON_TEST_PYTHON=/path/python scripts/test.sh ...
#                                       run pytest with another interpreter (scripts/floors.sh:
#                                       the lowest and newest dependencies)
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
    # every server and test tool (faketime, openssl) the suite needs; present ones are kept
    "$VENV/bin/python" scripts/servers.py install --cluster ||
        echo "[test] some servers or tools could not be installed (see above)" >&2
fi

ENV_FILE="$ROOT/.servers.env"
"$VENV/bin/python" scripts/servers.py start --cluster --env-file "$ENV_FILE"
trap '"$VENV/bin/python" scripts/servers.py stop --env-file "$ENV_FILE"' EXIT
set -a
# shellcheck disable=SC1090
source "$ENV_FILE"
set +a

PYTEST=("${ANARCHON_TEST_PYTHON:-$VENV/bin/python}" -m pytest -p no:cacheprovider -rs)
if [ "$#" -gt 0 ]; then
    "${PYTEST[@]}" "$@"
    exit
fi
# The directory decides the kind of test (tests/conftest.py). Two phases:
#  1. what mostly waits on servers and clocks, side by side: unit/ and contract/ on four
#     workers with coverage (floors on the engine and the claim rules:
#     scripts/coverage_floors.py), then integration/; Django's suite in a pytest of its own
#     (its test settings configure the process); the system tests marked `serial` (network
#     namespaces, faketime, a latency proxy: tight timings, little CPU), two at a time.
#  2. the rest of system/ (marked slow: real processes, mostly CPU to start them) on four
#     workers, alone: the CPU-heavy phase has the machine to itself.
# Each job of phase 1 writes its own log, printed when it ends.
status=0
LOGS="$ROOT/.test-logs"
mkdir -p "$LOGS"
finish() {  # wait for a phase-1 job, print its log, keep its failure
    local pid="$1" log="$2"
    wait "$pid" || status=$?
    cat "$log"
}
"${PYTEST[@]}" tests/django > "$LOGS/django.log" 2>&1 &
django=$!
"${PYTEST[@]}" -n 2 -m serial tests/system > "$LOGS/serial.log" 2>&1 &
serial=$!
COVERAGE_FILE="$ROOT/.coverage.unit" "${PYTEST[@]}" -n 4 --cov --cov-report= \
    tests/unit tests/contract || status=$?
COVERAGE_FILE="$ROOT/.coverage.unit" "$VENV/bin/python" scripts/coverage_floors.py || status=$?
"${PYTEST[@]}" -n 2 tests/integration || status=$?
finish "$django" "$LOGS/django.log"
finish "$serial" "$LOGS/serial.log"
"${PYTEST[@]}" -n 4 -m "not serial" tests/system || status=$?
exit "$status"
