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

# mysqlclient (the "mysql" extra) has no Linux wheels: it builds against the MySQL/MariaDB
# client headers and Python's own (Debian's python3 keeps those in python3-dev).
mysql_build_deps() {
    local python="$1"
    if command -v pkg-config >/dev/null 2>&1 &&
       { pkg-config --exists mysqlclient || pkg-config --exists libmariadb; } &&
       [ -f "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
        return 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "[setup] installing the MySQL client headers for mysqlclient (needs root and apt)" >&2
        apt-get update -qq >&2 &&
            apt-get install -y -qq pkg-config default-libmysqlclient-dev build-essential \
                python3-dev >&2
    else
        echo "[setup] mysqlclient needs pkg-config and the MySQL client headers" \
             "(Debian: apt-get install pkg-config default-libmysqlclient-dev build-essential)" >&2
    fi
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
    case ",$extras," in
        *,mysql,*|*,all,*) mysql_build_deps "$VENV/bin/python" ;;
    esac
    local target="$ROOT"
    [ -n "$extras" ] && target="$ROOT[$extras]"
    echo "[setup] installing anarchon${extras:+[$extras]} into .venv" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e "$target" >&2
}
