"""A short `make soak`: the controller in migrate mode under shifting traffic and random faults
on its own control plane, with every invariant of the long run checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.soak import SoakSettings, run_soak

pytestmark = pytest.mark.e2e


def test_a_short_soak_breaks_no_invariant(tmp_path: Path) -> None:
    settings = SoakSettings(
        seconds=100, phase_seconds=30, mean_fault_gap_seconds=10, fault_seconds=8, seed=3
    )
    summary = run_soak(settings, tmp_path)
    table = summary.table()
    assert summary.violations == 0, table
    # Else the invariants above held over nothing: faults came, and the controller acted.
    assert sum(summary.faults.values()) >= 3, table
    assert summary.cycles.get("ok", 0) >= 5, table
    assert summary.evictions.get("evicted", 0) >= 1, table
    assert summary.polls >= 100, table
