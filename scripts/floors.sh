#!/usr/bin/env bash
# The dependency floors, proven: the lowest releases pyproject.toml allows (uv's
# --resolution lowest-direct) on Python 3.10 and the newest on Python 3.13, each in a venv
# of its own, run the unit tests, a user project type-checked with mypy against the
# fresh editable install, and the claim/values conformance tests on SQLite,
# PostgreSQL, Redis (and Cluster) and Valkey ("core"), and the Celery schedule tests
# ("celery"). Celery's floor lives in a venv of its own: celery[redis] needs a newer redis
# than anarchon's floor, which would then go untested. The main suite (scripts/test.sh)
# stays on .venv's Python.
#
#   scripts/floors.sh --setup-only   check that anarchon[all] resolves to wheels only, and
#                                    make the venvs: the only step that needs the package
#                                    registries (.ci/run calls it before the tests' network
#                                    namespace)
#   scripts/floors.sh                run the tests in them (starts the rig's servers)
#
# An interpreter that is not on this machine (python3.10 / python3.13 on PATH, or under
# pyenv) is reported and its venv skipped: the machines this project runs on have both.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$ROOT"

TOOLS=("pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5" "mypy>=1.10"
       "opentelemetry-sdk>=1.20")  # the in-memory exporter of tests/system/observability
CORE="redis,valkey,postgres-binary,django,dramatiq,mysql,prometheus,otel"
# venv directory, Python version, uv resolution, extras, test sets
RUNS=(".venv-floors 3.10 lowest-direct $CORE core"
      ".venv-floors-celery 3.10 lowest-direct celery celery"
      ".venv-newest 3.13 highest $CORE,celery core,celery")

python_for() {
    local version="$1" candidate
    for candidate in "$(command -v "python$version" 2>/dev/null || true)" \
                     "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python"$version"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] &&
           "$candidate" -c 'import sys' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

wheels_only() {
    # `pip install "anarchon[all]"` must need no compiler: every requirement of [all]
    # resolves to Linux wheels (no source build allowed) on the oldest and newest Python
    local version
    for version in 3.10 3.13; do
        echo "[floors] anarchon[all] from wheels only on Python $version" >&2
        "$VENV/bin/uv" pip compile -q "$ROOT/pyproject.toml" --extra all --only-binary :all: \
            --python-version "$version" --python-platform x86_64-unknown-linux-gnu \
            -o /dev/null >&2
    done
}

setup() {
    [ -x "$VENV/bin/python" ] || setup_venv ""
    "$VENV/bin/python" -m pip install -q uv >&2
    wheels_only
    local run dir version resolution extras sets python
    for run in "${RUNS[@]}"; do
        read -r dir version resolution extras sets <<<"$run"
        if ! python="$(python_for "$version")"; then
            echo "[floors] no Python $version on this machine: $dir skipped" >&2
            continue
        fi
        echo "[floors] $dir: Python $version, --resolution $resolution" >&2
        rm -rf "${ROOT:?}/$dir"
        "$VENV/bin/uv" venv -q --python "$python" "$ROOT/$dir" >&2
        "$VENV/bin/uv" pip install -q --python "$ROOT/$dir/bin/python" \
            --resolution "$resolution" -C editable_mode=compat -e "$ROOT[$extras]" \
            -e "$ROOT/lab" "${TOOLS[@]}" >&2
        "$VENV/bin/uv" pip freeze --python "$ROOT/$dir/bin/python" \
            > "$ROOT/$dir/installed.txt" 2>/dev/null
    done
}

if [ "${1:-}" = "--setup-only" ]; then
    setup
    exit
fi

ENV_FILE="$ROOT/.servers.env"
"$VENV/bin/python" scripts/servers.py start --cluster --env-file "$ENV_FILE"
trap '"$VENV/bin/python" scripts/servers.py stop --env-file "$ENV_FILE"' EXIT
set -a
# shellcheck disable=SC1090
source "$ENV_FILE"
set +a

status=0
for run in "${RUNS[@]}"; do
    read -r dir version resolution extras sets <<<"$run"
    python="$ROOT/$dir/bin/python"
    if [ ! -x "$python" ]; then
        echo "[floors] $dir missing (scripts/floors.sh --setup-only makes it): skipped" >&2
        continue
    fi
    echo "[floors] $dir ($("$python" --version), $resolution; tests: $sets):" \
         "$(grep -iE '^(celery|croniter|django|psycopg|redis|valkey|prometheus.client|opentelemetry-api)==' \
            "$ROOT/$dir/installed.txt" 2>/dev/null | tr '\n' ' ')" >&2
    pytest=("$python" -m pytest -p no:cacheprovider -q -rs -n 2)
    if [[ ",$sets," == *,core,* ]]; then
        # (bad input to the claim-only brokers needs their drivers, not installed here)
        "${pytest[@]}" -m "not slow" tests/unit --ignore=tests/unit/test_bad_input.py ||
            status=$?
        # a user project type-checked with mypy against this fresh venv's editable install
        # (pyright, from the dev extra, runs in the main suite)
        "${pytest[@]}" tests/system/e2e/test_types_reach_users.py -k "not pyright" ||
            status=$?
        # one worker: these run schedulers on real clocks (as the main suite's -m slow)
        "$python" -m pytest -p no:cacheprovider -q -rs tests/contract/test_claim_contract.py \
            tests/contract/test_values.py \
            -k "(sqlite or postgres or redis or valkey) and not django" || status=$?
        # psycopg's floor: a claim cancelled mid-pipeline ends in CancelledError only
        "$python" -m pytest -p no:cacheprovider -q -rs \
            tests/integration/backends/test_postgres_cancellation.py || status=$?
        # logs, metrics scraped over HTTP, spans: prometheus_client's and OpenTelemetry's floors
        # (the Celery tests, and the one that imports the Celery example without
        # OpenTelemetry, need the celery extra: only the newest venv has it)
        only=()
        "$python" -c "import celery" 2>/dev/null ||
            only=(-k "not celery and not nothing_of_opentelemetry")
        "${pytest[@]}" tests/system/observability "${only[@]}" || status=$?
    fi
    if [[ ",$sets," == *,celery,* ]]; then
        "${pytest[@]}" -m "not slow" tests/integration/celery/test_units.py \
            tests/integration/celery/test_entries.py || status=$?
    fi
done
exit "$status"
