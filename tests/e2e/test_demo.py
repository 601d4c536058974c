"""`make demo` end to end: its own cluster, one dry-run cycle, then migrate cycles that pull the
chatty pair and the gang together while every replacement lands where it was sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.demo import run

pytestmark = pytest.mark.e2e


def test_the_demo_cuts_cross_zone_traffic_and_lands_its_moves(tmp_path: Path) -> None:
    rows = run(tmp_path / "demo", cycles=6)
    dry_run, migrate = rows[0], rows[1:]
    assert dry_run.mode == "dry-run" and dry_run.planned and dry_run.landed == 0
    assert migrate and all(row.mode == "migrate" for row in migrate)
    # at least 80% less traffic across zones
    assert rows[-1].crossing["zone"] <= 0.2 * dry_run.crossing["zone"]
    landed = sum(row.landed for row in migrate)
    judged = landed + sum(row.elsewhere for row in migrate)
    assert judged > 0 and landed / judged >= 0.9
    assert (tmp_path / "demo" / "demo.png").stat().st_size > 0
