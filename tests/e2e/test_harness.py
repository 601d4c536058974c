"""The harness leaves no process behind: not when a test fails, not after `make cluster-down`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cluster import BUILD_SCRIPT, build_binaries, local_cluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples" / "scenarios"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for every purpose but its exit status
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


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


def test_cluster_up_again_after_down_starts_fresh(tmp_path: Path) -> None:
    """etcd's data of the first run held the scenario's objects: the second `up` failed with a
    409 traceback and left etcd running."""
    command = [sys.executable, "-m", "harness.cluster"]
    scenario = str(EXAMPLES / "chatty-pair.yaml")
    up = [*command, "up", "--workdir", str(tmp_path), "--scenario", scenario]
    down = [*command, "down", "--workdir", str(tmp_path)]
    try:
        for _attempt in range(2):
            first = subprocess.run(up, capture_output=True, text=True, timeout=300, check=False)
            assert first.returncode == 0, first.stderr
            again = subprocess.run(up, capture_output=True, text=True, timeout=60, check=False)
            assert again.returncode == 1
            assert again.stderr.count("\n") == 1
            assert "still running" in again.stderr and "make cluster-down" in again.stderr
            pids = json.loads((tmp_path / "pids.json").read_text())
            stopped = subprocess.run(down, capture_output=True, timeout=120, check=False)
            assert stopped.returncode == 0
            assert not [name for name, pid in pids.items() if _running(pid)]
    finally:
        subprocess.run(down, capture_output=True, timeout=120, check=False)


def _children(parent: int) -> set[int]:
    """Live processes whose parent is `parent`."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue
        if int(ppid) == parent and state != "Z":
            found.add(int(stat.parent.name))
    return found


PROBE = """
import time
from tests.e2e.conftest import cluster  # noqa: F401  the session's control plane


def test_hold(cluster):
    time.sleep(600)
"""

# Each entry point, and how many processes it has started once it is well under way.
ENTRY_POINTS = {
    "cluster-up": (["-m", "harness.cluster", "up", "--scenario", "SCENARIO", "--workdir"], 5),
    "demo": (["-m", "harness.demo", "--workdir"], 6),
    "soak": (["-m", "harness.soak", "--seconds", "600", "--workdir"], 7),
    "trials": (["-m", "bench.modes", "--cycles", "1", "--results"], 6),
    "pytest": (["-m", "pytest", "-p", "no:cacheprovider", "-q", "PROBE", "--basetemp"], 5),
}


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_signal_stops_everything_an_entry_point_started(
    tmp_path: Path, entry: str, number: signal.Signals
) -> None:
    """Python's default for SIGTERM ended the harness on the spot and every server it had started
    in a session of its own lived on: a CI timeout on `make soak` left seven processes."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    args, started = ENTRY_POINTS[entry]
    paths = {"SCENARIO": EXAMPLES / "chatty-pair.yaml", "PROBE": tmp_path / "test_probe.py"}
    args = [str(paths.get(arg, arg)) for arg in args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (tmp_path / "output.log").open("wb") as output:
        harness = subprocess.Popen(
            [sys.executable, *args, str(tmp_path / "work")],
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        seen: set[int] = set()
        try:
            deadline = time.monotonic() + 300
            while len(_children(harness.pid)) < started and harness.poll() is None:
                seen |= _children(harness.pid)
                assert time.monotonic() < deadline, "the entry point never got under way"
                time.sleep(0.2)
            seen |= _children(harness.pid)
            assert harness.poll() is None, (tmp_path / "output.log").read_text()[-2000:]
            harness.send_signal(number)
            code = harness.wait(timeout=120)
        finally:
            if harness.poll() is None:
                harness.kill()
    for pid in seen:
        deadline = time.monotonic() + 5  # reaped by init once the harness has gone
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert not [pid for pid in seen if _running(pid)], (tmp_path / "output.log").read_text()[-2000:]
    assert len(seen) >= started
    assert code != 0


def test_builds_at_once_share_the_cache(tmp_path: Path) -> None:
    """`make test` and `make demo` (or a CI clone beside a checkout) may build at once: each
    fetches the CRDs into a name of its own and the first to finish wins, where a shared
    partial name made the later ones fail (`mv: cannot stat ...partial`). The binaries, already
    built, are linked in; three builds at once fetch the CRDs and kwok's stages."""
    built = build_binaries()
    bin_dir = tmp_path / "bin" / built.name
    bin_dir.mkdir(parents=True)
    linked = {p.name for p in built.iterdir() if p.is_file() and os.access(p, os.X_OK)}
    for name in linked:
        (bin_dir / name).symlink_to(built / name)
    environment = {**os.environ, "TOPOLOGY_REBALANCER_CACHE": str(tmp_path)}
    environment.pop("TOPOLOGY_REBALANCER_BIN", None)
    builds = [
        subprocess.Popen(
            ["bash", str(BUILD_SCRIPT)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outcomes = [build.communicate(timeout=600) for build in builds]
    assert [build.returncode for build in builds] == [0, 0, 0], [err for _out, err in outcomes]
    assert {out.strip().splitlines()[-1] for out, _err in outcomes} == {str(bin_dir)}
    fetched = sorted(p.name for p in bin_dir.iterdir() if p.name not in linked)
    assert fetched == sorted(p.name for p in built.iterdir() if p.name not in linked)
    for name in fetched:
        if (built / name).is_dir():
            assert sorted(p.name for p in (bin_dir / name).iterdir()) == sorted(
                p.name for p in (built / name).iterdir()
            )
