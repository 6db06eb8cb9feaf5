# Sourced by quickstart.sh and test.sh: makes .venv with Python 3.10+ and installs anarchon.
# Usage: setup_venv "EXTRAS" (e.g. "" or "dev,redis,postgres").

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

find_python() {
    for candidate in python3.12 python3.11 python3.10 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

setup_venv() {
    local extras="$1"
    local python
    if ! python="$(find_python)"; then
        echo "[setup] installing Python 3 (needs root and apt)" >&2
        apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip >&2
        python="$(find_python)"
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        if ! "$python" -m venv "$VENV" >/dev/null 2>&1; then
            echo "[setup] installing python3-venv (needs root and apt)" >&2
            rm -rf "$VENV"
            apt-get update -qq && apt-get install -y -qq python3-venv >&2
            "$python" -m venv "$VENV"
        fi
    fi
    local target="$ROOT"
    [ -n "$extras" ] && target="$ROOT[$extras]"
    echo "[setup] installing anarchon${extras:+[$extras]} into .venv" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    # compat: a plain path in a .pth, which mypy and pyright follow (setuptools' default
    # editable finder is an import hook they cannot see)
    "$VENV/bin/python" -m pip install -q -e "$target" --config-settings editable_mode=compat >&2
    # the lab (lab/: scenarios, naive stores, Redis comparison strategies) is a distribution
    # of its own; the tests and benchmarks that measure it need it in development
    if [[ ",$extras," == *,dev,* ]]; then
        "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT/lab" \
            --config-settings editable_mode=compat >&2
    fi
}
