"""The Grafana dashboard in the docs (``docs/grafana/anarchon.json``) reads only metrics
anarchon exports (declared in ``anarchon/observability/metrics.py``, plus the
instances-alive gauge of ``anarchon/observability/health.py``), each as its kind is
exposed (a counter as ``_total``, a histogram as ``_bucket``/``_count``/``_sum``), and
shows every one of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from anarchon.observability.health import ALIVE

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "anarchon.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
            "gauge": ("",)}


def declared() -> dict[str, str]:
    """Metric name -> kind, as metrics.py registers them."""
    source = (ROOT / "anarchon" / "observability" / "metrics.py").read_text()
    kinds = {name: kind for kind, name in
             re.findall(r'\b(counter|histogram|gauge)\("(anarchon_\w+)"', source)}
    kinds[ALIVE] = "gauge"
    return kinds


def queries(node: Any) -> list[str]:
    """Every PromQL text of the dashboard: panel targets and template queries."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition", "query") and isinstance(value, str):
                found.append(value)
            else:
                found += queries(value)
    elif isinstance(node, list):
        for item in node:
            found += queries(item)
    return found


def test_the_dashboard_reads_only_exported_metrics_and_shows_each() -> None:
    kinds = declared()
    assert len(kinds) == 11, kinds  # the metrics docs/operations.md lists
    exposed = {name + suffix: name for name, kind in kinds.items()
               for suffix in SUFFIXES[kind]}
    dashboard = json.loads(DASHBOARD.read_text())
    used = {metric for text in queries(dashboard) for metric in re.findall(
        r"\banarchon_\w+", text)}
    assert used, "no anarchon metric in the dashboard"
    assert used <= set(exposed), sorted(used - set(exposed))
    assert {exposed[metric] for metric in used} == set(kinds), sorted(
        set(kinds) - {exposed[metric] for metric in used})
    for panel in dashboard["panels"]:  # every panel reads the templated data source
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
