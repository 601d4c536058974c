"""The harness leaves no process behind: not when a test fails, not after `make cluster-down`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster import local_cluster

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples" / "scenarios"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for every purpose but its exit status
    return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_failing_test_still_stops_every_component(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="the test failed"), local_cluster(tmp_path) as cluster:
        pids = [component.process.pid for component in cluster.components.values()]
        raise RuntimeError("the test failed")
    assert len(pids) == 5
    assert not [pid for pid in pids if _running(pid)]


def test_cluster_up_and_down(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "harness.cluster"]
    up = subprocess.run(
        [
            *command,
            "up",
            "--workdir",
            str(tmp_path),
            "--scenario",
            str(EXAMPLES / "chatty-pair.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    pids = json.loads((tmp_path / "pids.json").read_text())
    try:
        assert up.returncode == 0, up.stderr
        assert f"kubeconfig: {tmp_path / 'kubeconfig'}" in up.stdout
        assert "prometheus: http://127.0.0.1:" in up.stdout
        assert set(pids) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
            "exporter",
            "prometheus",
        }
        assert all(_running(pid) for pid in pids.values())
    finally:
        down = subprocess.run(
            [*command, "down", "--workdir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert down.returncode == 0
    assert not [name for name, pid in pids.items() if _running(pid)]
