"""The checkout the harness runs from, found once here: the product never looks for it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
DEPLOY = REPO / "deploy"
CHART = REPO / "charts" / "topology-rebalancer"
RULES = DEPLOY / "components" / "monitoring" / "prometheusrule.yaml"
"""The PrometheusRule: its `spec` is a plain rule file, which the tests load into Prometheus."""
