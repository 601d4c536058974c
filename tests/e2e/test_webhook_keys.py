"""Webhook replicas share one CA through a Secret on the real API server: racing replicas agree,
either replica's answer is trusted by the caBundle the other published, renewals keep the CA,
and `rebalancer run` wires it all up."""

from __future__ import annotations

import base64
import datetime
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import free_port, wait_until
from harness.webhook import webhook_configuration
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import list_raw
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.planning.landing import Hint
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import WorkloadSpec
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.serving_keys import (
    issued_serving_keys,
    keys_from_secret,
    secret_data,
    shared_serving_keys,
)
from rebalancer.webhook.tls import (
    ServingKeys,
    issue_serving_keys,
    key_pem,
    make_ca,
    pem,
    serving_certificate,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "keys"
IPS = ["127.0.0.1"]


def _keys(cluster: LocalCluster, secret: str) -> ServingKeys:
    return shared_serving_keys(
        cluster.api_client(), (NAMESPACE, secret), dns_names=[], ip_addresses=IPS
    )


def _store_short_lived(cluster: LocalCluster, secret: str, *, ca_days: int, leaf_days: int) -> None:
    """Keys that expire within the renewal margin, as a long-running cluster would come to hold."""
    ca, ca_key = make_ca("short-lived-ca", datetime.timedelta(days=ca_days))
    leaf, key = serving_certificate(
        ca, ca_key, [], IPS, validity=datetime.timedelta(days=leaf_days)
    )
    keys = ServingKeys(pem(ca), key_pem(ca_key), pem(leaf), key_pem(key))
    core = client.CoreV1Api(cluster.api_client())
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=secret), type="kubernetes.io/tls", data=secret_data(keys)
    )
    try:
        core.replace_namespaced_secret(secret, NAMESPACE, body)
    except client.ApiException as error:
        if error.status != 404:
            raise
        core.create_namespaced_secret(NAMESPACE, body)


def test_racing_replicas_end_up_with_the_same_keys(cluster: LocalCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: _keys(cluster, "race"), range(4)))
    assert all(keys == results[0] for keys in results)
    secret: Any = client.CoreV1Api(cluster.api_client()).read_namespaced_secret("race", NAMESPACE)
    assert secret.type == "kubernetes.io/tls"
    assert base64.b64decode(secret.data["ca.crt"]) == results[0].ca


def test_renewal_keeps_the_ca_until_the_ca_itself_runs_out(cluster: LocalCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    _store_short_lived(cluster, "renew", ca_days=3650, leaf_days=30)
    stored: Any = client.CoreV1Api(cluster.api_client()).read_namespaced_secret("renew", NAMESPACE)
    expiring = keys_from_secret(stored.data)
    assert expiring is not None
    renewed = _keys(cluster, "renew")
    assert renewed.ca == expiring.ca and renewed.certificate != expiring.certificate
    assert _keys(cluster, "renew") == renewed  # fit keys are served as they are
    _store_short_lived(cluster, "renew", ca_days=30, leaf_days=20)
    assert _keys(cluster, "renew").ca not in {renewed.ca, expiring.ca}  # the CA itself ran out


def test_garbage_in_the_secret_is_replaced(cluster: LocalCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_secret(
        NAMESPACE,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="garbage"),
            type="kubernetes.io/tls",
            data={"tls.crt": "bm90IGEgY2VydA==", "tls.key": "bm90IGEga2V5"},
        ),
    )
    keys = _keys(cluster, "garbage")
    assert _keys(cluster, "garbage") == keys


def test_either_replica_steers_with_the_ca_the_other_published(cluster: LocalCluster) -> None:
    api = cluster.api_client()
    cluster.ensure_namespace(NAMESPACE)
    hints = HintStore(api, NAMESPACE, "hints")
    first = WebhookServer(hints, _keys(cluster, "shared"), port=free_port(), address="127.0.0.1")
    second = WebhookServer(hints, _keys(cluster, "shared"), port=free_port(), address="127.0.0.1")
    first.start()
    second.start()
    name = "keys-steer"
    url = f"https://127.0.0.1:{second.port}/mutate"  # the API server calls the second only
    cluster.apply([webhook_configuration(name, url, [NAMESPACE])])
    first.publish_ca(api, name)  # the first replica's CA is the one caBundle trusts
    try:
        hints.add(
            Hint(
                namespace=NAMESPACE,
                owner_kind="StatefulSet",
                owner_name="steered",
                workload=f"StatefulSet/{NAMESPACE}/steered",
                domain={ZONE_LABEL: "zone-c"},
                expires=time.time() + 300,
            ),
            time.time(),
        )
        cluster.apply(
            workload_objects(WorkloadSpec(name="steered", namespace=NAMESPACE, kind="StatefulSet"))
        )
        core = client.CoreV1Api(api)

        def pods() -> list[dict[str, Any]]:
            return list_raw(
                "Pod",
                lambda **kw: core.list_namespaced_pod(
                    NAMESPACE, label_selector="app=steered", **kw
                ),
            )

        wait_until(lambda: len(pods()) == 1, 30, "the steered pod")
        [pod] = pods()
        affinity = pod["spec"]["affinity"]["nodeAffinity"]
        [term] = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["preference"]["matchExpressions"] == [
            {"key": ZONE_LABEL, "operator": "In", "values": ["zone-c"]}
        ]
        assert hints.pending(time.time()) == []
    finally:
        client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(name)
        client.AppsV1Api(api).delete_namespaced_stateful_set("steered", NAMESPACE)
        first.stop()
        second.stop()


def _run_once(
    cluster: LocalCluster, tmp_path: Path, configuration: str, secret: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`rebalancer run --once` with the webhook; nobody serves Prometheus, so the cycle fails
    harmlessly (exit 3) after the webhook's keys and caBundle are set up."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: dry-run\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rebalancer.cli",
            "run",
            "--once",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus=http://127.0.0.1:{free_port()}",
            f"--policy={policy}",
            f"--state-configmap={NAMESPACE}/run-state",
            "--metrics-port=0",
            "--metrics-address=127.0.0.1",
            f"--webhook-port={free_port()}",
            f"--webhook-config={configuration}",
            f"--webhook-secret={NAMESPACE}/{secret}",
            f"--hints-configmap={NAMESPACE}/run-hints",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_command_stores_the_keys_and_publishes_their_ca(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    api = cluster.api_client()
    cluster.ensure_namespace(NAMESPACE)
    name = "keys-run"
    cluster.apply([webhook_configuration(name, "https://127.0.0.1:1/mutate", [NAMESPACE])])
    run = _run_once(cluster, tmp_path, name, "run-keys")
    try:
        assert run.returncode == 3, run.stderr
        secret: Any = client.CoreV1Api(api).read_namespaced_secret("run-keys", NAMESPACE)
        admission = client.AdmissionregistrationV1Api(api)
        configuration: Any = admission.read_mutating_webhook_configuration(name)
        [webhook] = configuration.webhooks
        assert webhook.client_config.ca_bundle == secret.data["ca.crt"]
    finally:
        client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(name)


def test_issued_certificates_are_only_read(cluster: LocalCluster, tmp_path: Path) -> None:
    """As with cert-manager: the issuer wrote the Secret and its injector the caBundle; the
    controller serves that Secret and writes neither."""
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    cluster.ensure_namespace(NAMESPACE)
    keys = issue_serving_keys([], IPS)
    data = {k: v for k, v in secret_data(keys).items() if k != "ca.key"}  # issuers keep it
    core.create_namespaced_secret(
        NAMESPACE,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="issued"), type="kubernetes.io/tls", data=data
        ),
    )
    name = "keys-issued"
    configuration = webhook_configuration(name, "https://127.0.0.1:1/mutate", [NAMESPACE])
    configuration["webhooks"][0]["clientConfig"]["caBundle"] = data["ca.crt"]
    cluster.apply([configuration])
    before: Any = core.read_namespaced_secret("issued", NAMESPACE)
    admission = client.AdmissionregistrationV1Api(api)
    try:
        run = _run_once(cluster, tmp_path, name, "issued", "--webhook-certificates=issued")
        assert run.returncode == 3, run.stderr
        after: Any = core.read_namespaced_secret("issued", NAMESPACE)
        assert after.metadata.resource_version == before.metadata.resource_version
        current: Any = admission.read_mutating_webhook_configuration(name)
        assert current.webhooks[0].client_config.ca_bundle == data["ca.crt"]
        assert issued_serving_keys(api, (NAMESPACE, "issued")).certificate == keys.certificate
        missing = _run_once(cluster, tmp_path, name, "not-issued", "--webhook-certificates=issued")
        assert missing.returncode == 3
        assert missing.stderr.strip().splitlines()[-1] == (
            f"rebalancer: Secret {NAMESPACE}/not-issued: HTTP 404 (has the issuer issued it yet?)"
        )
    finally:
        admission.delete_mutating_webhook_configuration(name)
