"""The Prometheus side and the dashboard against real data: a real Prometheus scrapes the
exporter and a running `rebalancer run` (dry-run, then a rejected policy, then migrate), with
deploy/'s rules loaded. The rules are healthy, the recording rule serves the pairs the controller
reads (and a policy can plan from it), the policy alert fires, and every dashboard panel query
returns data."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client

from dashboards.build import dashboard_json
from harness.cluster import LocalCluster
from harness.live import live_scenario
from harness.paths import RULES
from harness.process import free_port, wait_until
from harness.prometheus import PrometheusServer, ScrapeJob
from harness.webhook import webhook_configuration
from rebalancer.config.policy import load_policy
from tests.conftest import LIVE_POLICY_YAML, split_pair_scenario
from tests.e2e.setups import acting_policy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
NAMESPACE = "obs"
CONTROLLER_NAMESPACE = "topology-rebalancer"
"""The `namespace` label the scrape adds, as a ServiceMonitor would; the dashboard filters on it."""
WEBHOOK = "topology-rebalancer-obs"
# Flows have no byte counts; a size per flow lets the cost panels show an estimate.
POLICY = (
    LIVE_POLICY_YAML.replace("max_age_seconds: 60", "max_age_seconds: 60, bytes_per_unit: 1000")
    + acting_policy(NAMESPACE)
    + "interval_seconds: 2\ncooldown: {per_workload_seconds: 0}\n"
)


@dataclass
class Observed:
    prometheus: PrometheusServer
    cluster: LocalCluster
    metrics_port: int


def _set_policy(cluster: LocalCluster, text: str) -> None:
    core = client.CoreV1Api(cluster.api_client())
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="policy"), data={"policy.yaml": text}
    )
    try:
        core.replace_namespaced_config_map("policy", NAMESPACE, body)
    except client.ApiException as error:
        if error.status != 404:
            raise
        core.create_namespaced_config_map(NAMESPACE, body)


def _value(prometheus: PrometheusServer, promql: str) -> float:
    return sum(float(item["value"][1]) for item in prometheus.query(promql))


@pytest.fixture(scope="module")
def observed(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    """The controller through dry-run, a rejected policy and migrate, all scraped."""
    workdir = tmp_path_factory.mktemp("observability")
    rule = yaml.safe_load(RULES.read_text())
    rules = workdir / "rules.yml"
    rules.write_text(yaml.safe_dump(rule["spec"]))
    metrics_port, webhook_port = free_port(), free_port()
    cluster.ensure_namespace(NAMESPACE)
    cluster.apply(
        [webhook_configuration(WEBHOOK, f"https://127.0.0.1:{webhook_port}/mutate", [NAMESPACE])]
    )
    _set_policy(cluster, POLICY + "mode: dry-run\n")
    controller = ScrapeJob([f"127.0.0.1:{metrics_port}"], {"namespace": CONTROLLER_NAMESPACE})
    with live_scenario(
        cluster,
        split_pair_scenario(NAMESPACE),
        workdir / "prometheus",
        extra_jobs={"topology-rebalancer": controller},
        rule_files=[rules],
    ) as (_truth, prometheus):
        command = [
            sys.executable,
            "-m",
            "rebalancer.cli",
            "run",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus={prometheus.url}",
            f"--policy-configmap={NAMESPACE}/policy",
            f"--state-configmap={NAMESPACE}/state",
            f"--metrics-port={metrics_port}",
            "--metrics-address=127.0.0.1",
            f"--webhook-port={webhook_port}",
            f"--webhook-config={WEBHOOK}",
            f"--webhook-secret={NAMESPACE}/webhook-keys",
            f"--hints-configmap={NAMESPACE}/hints",
            "--leader-elect",
            f"--lease={NAMESPACE}/leader",
        ]
        replica = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=(workdir / "controller.log").open("w")
        )
        try:
            evictions = 'topology_rebalancer_evictions_total{result="%s"}'
            wait_until(lambda: _value(prometheus, evictions % "would-evict") > 0, 60, "dry-run")
            _set_policy(cluster, POLICY + "mode: sideways\n")
            wait_until(
                lambda: (
                    _value(
                        prometheus,
                        'ALERTS{alertname="TopologyRebalancerPolicyRejected",alertstate="firing"}',
                    )
                    > 0
                ),
                60,
                "the policy alert",
            )
            _set_policy(cluster, POLICY + "mode: migrate\n")
            wait_until(
                lambda: (
                    _value(
                        prometheus, 'topology_rebalancer_landings_total{result="landed-in-target"}'
                    )
                    > 0
                ),
                120,
                "a migrate-mode landing",
            )
            # Back to dry-run, so pods stay put while the tests compare series. The controller
            # keeps running: a stopped target's series are marked stale and vanish from queries.
            _set_policy(cluster, POLICY + "mode: dry-run\n")
            wait_until(
                lambda: _value(prometheus, 'topology_rebalancer_mode{mode="dry-run"}') == 1,
                30,
                "dry-run again",
            )
            time.sleep(3)
            yield Observed(prometheus, cluster, metrics_port)
        finally:
            replica.send_signal(signal.SIGTERM)
            replica.wait(timeout=30)
            client.AdmissionregistrationV1Api(
                cluster.api_client()
            ).delete_mutating_webhook_configuration(WEBHOOK)


def test_the_live_metrics_pass_promtool_and_say_the_version(observed: Observed) -> None:
    """promtool refused topology_rebalancer_traffic_total: a gauge named like a counter."""
    served = requests.get(f"http://127.0.0.1:{observed.metrics_port}/metrics", timeout=5).text
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=served, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert 'topology_rebalancer_build_info{version="' in served
    assert "topology_rebalancer_traffic_crossing{" in served  # a cycle ran: not just the help


def test_the_rules_load_and_evaluate_cleanly(observed: Observed) -> None:
    answer = requests.get(f"{observed.prometheus.url}/api/v1/rules", timeout=5).json()
    rules = [rule for group in answer["data"]["groups"] for rule in group["rules"]]
    assert len(rules) == 6
    assert {rule["name"]: rule["health"] for rule in rules} == {
        rule["name"]: "ok" for rule in rules
    }


def test_the_recording_rule_serves_the_pairs_the_controller_reads(
    observed: Observed, tmp_path: Path
) -> None:
    recorded = observed.prometheus.query("topology_rebalancer:hubble_flows:rate5m")
    raw = observed.prometheus.query(
        "sum by (source_namespace, source_pod, destination_namespace, destination_pod) "
        '(rate(hubble_flows_processed_total{source_pod!="", destination_pod!=""}[5m]))'
    )

    def pairs(series: list[dict[str, Any]]) -> set[str]:
        return {
            json.dumps({k: v for k, v in item["metric"].items() if k != "__name__"}, sort_keys=True)
            for item in series
        }

    assert recorded and pairs(recorded) == pairs(raw)
    policy = tmp_path / "policy.yaml"
    recorded_policy = yaml.safe_load(
        (ROOT / "examples" / "policies" / "recorded-hubble.yaml").read_text()
    )
    live = yaml.safe_load(POLICY)
    policy.write_text(yaml.safe_dump({**live, "traffic": recorded_policy["traffic"]}))
    load_policy(policy)  # the combination is a valid policy
    planned = subprocess.run(
        [
            sys.executable,
            "-m",
            "rebalancer.cli",
            "plan",
            "--kubeconfig",
            str(observed.cluster.kubeconfig),
            "--prometheus",
            observed.prometheus.url,
            "--policy",
            str(policy),
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["figures"]["total"] > 0


def test_every_dashboard_panel_returns_data(observed: Observed) -> None:
    board = json.loads(dashboard_json())
    assert board["templating"]["list"][0]["type"] == "datasource"
    empty, failed = [], []
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$namespace", CONTROLLER_NAMESPACE)
            expr = expr.replace("$__rate_interval", "1m")
            answer = requests.get(
                f"{observed.prometheus.url}/api/v1/query", params={"query": expr}, timeout=5
            ).json()
            if answer["status"] != "success":
                failed.append(f"{panel['title']}: {answer.get('error')}")
            elif not answer["data"]["result"]:
                empty.append(f"{panel['title']}: {expr}")
    assert failed == []
    assert empty == []
