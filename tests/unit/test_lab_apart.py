"""The lab (scenarios, naive stores, Redis comparison strategies) is a distribution of its
own: the core reaches it only through the ``anarchon.lab`` entry points, and says what to
install when it is missing."""

from __future__ import annotations

import pytest

from anarchon.backends import from_url
from anarchon.backends.lab import INSTALL, lab_part
from anarchon.backends.redis import comparison_backend


def test_a_missing_lab_part_names_what_to_install() -> None:
    with pytest.raises(ImportError, match="lab code and the lab is not installed") as info:
        lab_part("no-such-part", "redis strategy 'x'")
    assert INSTALL in str(info.value) and "anarchon-lab" in str(info.value)


def test_the_installed_lab_serves_the_comparison_strategies() -> None:
    backend = from_url("redis://127.0.0.1:1/0?strategy=stream-id&lab=1")
    assert type(backend).__module__ == "anarchon_lab.redis_strategies"
    with pytest.raises(ValueError, match="unknown redis strategy 'nope'"):
        comparison_backend("nope", "redis://127.0.0.1:1/0")


def test_the_core_imports_no_lab_module() -> None:
    import subprocess
    import sys

    code = ("import sys, anarchon, anarchon.backends, anarchon.cli, anarchon.backends.redis; "
            "print(sorted(m for m in sys.modules if m.startswith('anarchon_lab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out
