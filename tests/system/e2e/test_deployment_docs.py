"""The deployment page's config blocks are checked where it is cheap: the Compose file
and the Kubernetes manifest parse as YAML with the documented grace period and probes,
and ``systemd-analyze verify`` accepts the unit (its ExecStart pointed at this Python)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.examples import ROOT

pytestmark = pytest.mark.e2e

PAGE = ROOT / "docs" / "deployment.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_kubernetes_manifest_and_compose_file_parse() -> None:
    documents: list[Any] = [yaml.safe_load(body) for body in blocks("yaml")]
    compose, deployment = documents
    assert compose["services"]["scheduler"]["stop_grace_period"] == "45s"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 45
    [container] = pod["containers"]
    live = container["livenessProbe"]
    assert live["exec"]["command"][:2] == ["anarchon", "health"]
    assert live["periodSeconds"] * live["failureThreshold"] > 30  # above the lease


def test_the_health_command_the_probes_call_exists() -> None:
    result = subprocess.run([sys.executable, "-m", "anarchon", "health", "--help"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--quiet" in result.stdout, result.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    [unit] = blocks("ini")
    unit = unit.replace("/opt/myapp/.venv/bin/python", sys.executable)
    unit = unit.replace("User=myapp", "User=root").replace("/opt/myapp", str(tmp_path))
    path = tmp_path / "anarchon-docs.service"
    path.write_text(unit)
    result = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                            text=True, timeout=60)
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if path.name in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr
