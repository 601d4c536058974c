"""The chart on the real API server: `helm install` in migrate mode into a namespace of its own,
then the controller, authenticated as the chart's ServiceAccount (a bound token, not admin),
with the chart's own flags, through a whole migrate cycle: no call refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.cluster import LocalCluster
from harness.deploy import controller_args, helm, objects_of, render_chart
from harness.paths import CHART
from harness.scrape import total
from tests.e2e.setups import migrate_cycle_as
from tests.e2e.test_deploy import POLICY

pytestmark = pytest.mark.e2e

NAMESPACE = "charted"
WORKLOADS = "chart-workloads"  # not test_deploy's: both load the split pair in the session
NAME = "tr-chart"
VALUES = {"mode": "migrate", "fullnameOverride": NAME}


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    workdir = tmp_path_factory.mktemp("chart")
    values = workdir / "values.json"
    document = yaml.safe_load(POLICY.replace("[rbac]", f"[{WORKLOADS}]"))
    assert document["scope"]["namespaces"]["include"] == [WORKLOADS]
    policy = {key: value for key, value in document.items() if key != "mode"}
    values.write_text(json.dumps({**VALUES, "policy": policy}))
    command = [helm(), "--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE]
    done = subprocess.run(
        [*command, "install", "rebalancer", str(CHART), "--create-namespace", "-f", str(values)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kubeconfig = cluster.service_account_kubeconfig(NAMESPACE, NAME, workdir / "sa.kubeconfig")
    try:
        yield kubeconfig
    finally:
        subprocess.run([*command, "uninstall", "rebalancer"], capture_output=True, check=False)


def test_the_charts_service_account_runs_a_whole_migrate_cycle(
    cluster: LocalCluster, installed: Path, tmp_path: Path
) -> None:
    objects = objects_of(render_chart(VALUES, namespace=NAMESPACE))
    args = controller_args(objects, {"POD_NAMESPACE": NAMESPACE}, NAME)
    run = migrate_cycle_as(
        cluster, installed, args, webhook=NAME, workloads=WORKLOADS, workdir=tmp_path
    )
    assert run.refused() == []
    assert total(run.samples, "topology_rebalancer_evictions_total", result="evicted") >= 1
    assert total(run.samples, "topology_rebalancer_landings_total", result="landed-in-target") >= 1
