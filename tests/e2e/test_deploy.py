"""deploy/ on the real API server: every overlay passes a server-side dry-run; installed as a user
would (examples/install copied out of the repository, into a namespace of their choosing), the
controller, authenticated as the ServiceAccount it creates (a bound token, not admin), runs a
whole migrate cycle with the rights it grants; and what it was not granted is refused."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from harness.bundles import INSTALL
from harness.cluster import LocalCluster, build_binaries
from harness.deploy import (
    OVERLAYS,
    build_overlay,
    controller_args,
    install_crds,
    kubectl,
    kustomize,
    objects_of,
)
from harness.paths import DEPLOY
from harness.process import wait_until
from harness.scrape import total
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.routing import RoutingClient
from rebalancer.clients.surge import SurgeClient, SurgeError
from rebalancer.cluster.topology import ZONE_LABEL, Domain
from rebalancer.cost.routing import ROUTING_ANNOTATION
from rebalancer.planning.routing import RoutingChange
from rebalancer.planning.surge import DELETION_COST, LOWEST_COST, surge_record
from rebalancer.planning.types import Move
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import WorkloadSpec
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import migrate_cycle_as

pytestmark = pytest.mark.e2e

NAMESPACE = "platform-tools"
"""Not the default one: the install example must carry it into every reference."""
WORKLOADS = "rbac"
ACCOUNT = "topology-rebalancer"
POLICY = (
    LIVE_POLICY_YAML
    + f"""
mode: migrate
interval_seconds: 3
scope: {{namespaces: {{include: [{WORKLOADS}]}}}}
persistence: {{cycles: 1}}
cooldown: {{per_workload_seconds: 0}}
thresholds: {{min_gain: 1, min_gain_ratio: 0}}
"""
)


def _kubectl(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl(), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture(scope="module")
def operator_crds(cluster: LocalCluster) -> None:
    """ServiceMonitor, PrometheusRule, Issuer and Certificate, so the API server can validate
    deploy/'s own."""
    install_crds(cluster.kubeconfig, sorted(build_binaries().glob("crds-*")))
    cluster.ensure_namespace("topology-rebalancer")  # the overlays' own


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_passes_a_server_side_dry_run(
    cluster: LocalCluster, operator_crds: None, overlay: str
) -> None:
    result = _kubectl(
        cluster, "apply", "--dry-run=server", "-k", str(DEPLOY / "overlays" / overlay)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(build_overlay(overlay))


def test_the_kind_demo_app_passes_a_server_side_dry_run(cluster: LocalCluster) -> None:
    cluster.ensure_namespace("demo")  # a dry-run creates no Namespace for the objects after it
    demo = _kubectl(
        cluster, "apply", "--dry-run=server", "-f", str(DEPLOY / "kind" / "demo-app.yaml")
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("(server dry run)") == 6


def _install_copy(directory: Path, bundles: list[str]) -> Path:
    """examples/install copied out of the repository, with this test's namespace and bundles."""
    copy = directory / "install"
    shutil.copytree(INSTALL, copy)
    kustomization = yaml.safe_load((copy / "kustomization.yaml").read_text())
    kustomization["namespace"] = NAMESPACE
    kustomization["resources"] = [f"bundle/{bundle}.yaml" for bundle in bundles]
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return copy


@pytest.mark.parametrize("mode", OVERLAYS)
def test_a_copy_of_the_install_example_passes_a_server_side_dry_run(
    cluster: LocalCluster, operator_crds: None, tmp_path: Path, mode: str
) -> None:
    copy = _install_copy(tmp_path, [mode, "monitoring"])
    cluster.ensure_namespace(NAMESPACE)
    result = _kubectl(cluster, "apply", "--dry-run=server", "-k", str(copy))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(objects_of(kustomize(copy)))


@pytest.fixture(scope="module")
def installed(
    cluster: LocalCluster, operator_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A copy of the install example in migrate mode applied for real, its policy set for a
    quick test, and a kubeconfig for its ServiceAccount. The webhook is pointed at the controller
    the test runs on loopback."""
    workdir = tmp_path_factory.mktemp("deploy")
    copy = _install_copy(workdir, ["migrate"])
    applied = _kubectl(cluster, "apply", "-k", str(copy))
    assert applied.returncode == 0, applied.stderr
    core = client.CoreV1Api(cluster.api_client())
    core.patch_namespaced_config_map(
        "topology-rebalancer-policy", NAMESPACE, {"data": {"policy.yaml": POLICY}}
    )
    kubeconfig = cluster.service_account_kubeconfig(NAMESPACE, ACCOUNT, workdir / "sa.kubeconfig")
    try:
        yield kubeconfig
    finally:
        deleted = _kubectl(cluster, "delete", "--wait=false", "-k", str(copy))
        assert deleted.returncode == 0, deleted.stderr


def test_the_service_account_runs_a_whole_migrate_cycle(
    cluster: LocalCluster, installed: Path, tmp_path: Path
) -> None:
    args = controller_args(
        build_overlay("migrate"), {"PROMETHEUS_URL": "", "POD_NAMESPACE": NAMESPACE}
    )
    run = migrate_cycle_as(
        cluster,
        installed,
        args,
        webhook="topology-rebalancer",
        workloads=WORKLOADS,
        workdir=tmp_path,
    )
    assert run.refused() == []
    assert total(run.samples, "topology_rebalancer_evictions_total", result="evicted") >= 1
    assert total(run.samples, "topology_rebalancer_landings_total", result="landed-in-target") >= 1
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    core = client.CoreV1Api(cluster.api_client())
    secret: Any = core.read_namespaced_secret("topology-rebalancer-webhook", NAMESPACE)
    [webhook] = admission.read_mutating_webhook_configuration("topology-rebalancer").webhooks or []
    assert webhook.client_config.ca_bundle == secret.data["ca.crt"]
    lease: Any = client.CoordinationV1Api(cluster.api_client()).read_namespaced_lease(
        "topology-rebalancer", NAMESPACE
    )
    assert lease.spec.holder_identity == "rebalancer-test-0"
    state: Any = core.read_namespaced_config_map("topology-rebalancer-state", NAMESPACE)
    assert "state.json" in (state.data or {})


def _statuses(calls: dict[str, Callable[[], Any]]) -> dict[str, int]:
    """Each call's HTTP status: 200, or the one it was refused with."""
    statuses = {}
    for what, call in calls.items():
        try:
            call()
            statuses[what] = 200
        except client.ApiException as error:
            statuses[what] = error.status
    return statuses


def test_what_deploy_does_not_grant_is_refused(cluster: LocalCluster, installed: Path) -> None:
    api = config.new_client_from_config(config_file=str(installed))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="x"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="x", image="x")]),
    )
    forbidden: dict[str, Callable[[], Any]] = {
        "delete a pod": lambda: core.delete_namespaced_pod("any", WORKLOADS),
        "list Secrets in its own namespace": lambda: core.list_namespaced_secret(NAMESPACE),
        "read a Secret elsewhere": lambda: core.read_namespaced_secret("any", "default"),
        "update another ConfigMap": lambda: core.replace_namespaced_config_map(
            "other", NAMESPACE, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="other"))
        ),
        "patch another webhook": lambda: admission.patch_mutating_webhook_configuration(
            "someone-elses", [{"op": "add", "path": "/metadata/labels", "value": {}}]
        ),
        "create a pod": lambda: core.create_namespaced_pod(WORKLOADS, pod),
        "patch a Service": lambda: core.patch_namespaced_service(
            "kubernetes",
            "default",
            {"spec": {"trafficDistribution": "PreferSameZone"}},
            dry_run="All",
        ),
    }
    assert _statuses(forbidden) == dict.fromkeys(forbidden, 403)
    # and what it was granted works with the same credentials
    assert core.list_node().items
    policy: Any = core.read_namespaced_config_map("topology-rebalancer-policy", NAMESPACE)
    assert yaml.safe_load(policy.data["policy.yaml"])["mode"] == "migrate"


class _Component:
    """A component's RBAC objects, from the install example with its bundle taken in: `grant`
    applies them alone (the installed policy stays as the fixture set it), and leaving the
    `with` block deletes them."""

    def __init__(
        self, cluster: LocalCluster, directory: Path, name: str, kinds: set[str] | None = None
    ) -> None:
        built = objects_of(kustomize(_install_copy(directory, ["migrate", name])))
        granted = [o for o in built if o["metadata"]["name"] == f"topology-rebalancer-{name}"]
        assert {o["kind"] for o in granted} == (kinds or {"ClusterRole", "ClusterRoleBinding"})
        self.cluster = cluster
        self.objects = directory / f"{name}.yaml"
        self.objects.write_text(yaml.safe_dump_all(granted))

    def grant(self) -> None:
        applied = _kubectl(self.cluster, "apply", "-f", str(self.objects))
        assert applied.returncode == 0, applied.stderr

    def __enter__(self) -> _Component:
        return self

    def __exit__(self, *_exc: object) -> None:
        deleted = _kubectl(self.cluster, "delete", "--ignore-not-found", "-f", str(self.objects))
        assert deleted.returncode == 0, deleted.stderr


def test_the_routing_bundle_grants_the_patch_of_a_service_and_nothing_more(
    cluster: LocalCluster, installed: Path, tmp_path: Path
) -> None:
    """Without bundle/routing.yaml the ServiceAccount's routing change is refused; with it the
    change is made, every other write to a Service is still refused (by RBAC), and so is, by
    its admission policy, any patch of another field or of a Service that did not opt in."""
    admin = client.CoreV1Api(cluster.api_client())
    spec = client.V1ServiceSpec(selector={"app": "routed"}, ports=[client.V1ServicePort(port=80)])
    opted_in = client.V1ObjectMeta(name="routed", annotations={ROUTING_ANNOTATION: "apply"})
    body = client.V1Service(metadata=opted_in, spec=spec)
    created: Any = admin.create_namespaced_service(NAMESPACE, body)
    other = client.V1Service(metadata=client.V1ObjectMeta(name="not-opted-in"), spec=spec)
    admin.create_namespaced_service(NAMESPACE, other)
    api = config.new_client_from_config(config_file=str(installed))  # type: ignore[no-untyped-call]
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
    routing = RoutingClient(api, recorder, dry_run=False)
    change = RoutingChange(
        f"{NAMESPACE}/routed", "PreferSameZone", created.metadata.resource_version, "test"
    )
    core = client.CoreV1Api(api)

    def patch(name: str, body: dict[str, Any]) -> Callable[[], Any]:
        """As the ServiceAccount, a server-side dry run: nothing changes if it is let through."""
        return lambda: core.patch_namespaced_service(name, NAMESPACE, body, dry_run="All")

    admitted: dict[str, Callable[[], Any]] = {
        "another spec field": patch("routed", {"spec": {"sessionAffinity": "ClientIP"}}),
        "a label": patch("routed", {"metadata": {"labels": {"team": "x"}}}),
        "the opt-in withdrawn": patch("routed", {"metadata": {"annotations": None}}),
        "a Service that did not opt in": patch(
            "not-opted-in", {"spec": {"trafficDistribution": "PreferSameZone"}}
        ),
    }
    kinds = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    try:
        with _Component(cluster, tmp_path, "routing", kinds) as component:
            assert routing.change(change).result == "refused"
            component.grant()
            # The authorizer and the admission policy follow their objects through watches: a
            # moment after they are created.
            wait_until(
                lambda: set(_statuses(admitted).values()) == {403}, 30, "the admission policy"
            )
            wait_until(lambda: routing.change(change).result == "set", 30, "the routing change")
            found: Any = admin.read_namespaced_service("routed", NAMESPACE)
            assert found.spec.traffic_distribution == "PreferSameZone"
            still_forbidden: dict[str, Callable[[], Any]] = {
                "delete": lambda: core.delete_namespaced_service("routed", NAMESPACE),
                "replace": lambda: core.replace_namespaced_service("routed", NAMESPACE, found),
                "create": lambda: core.create_namespaced_service(NAMESPACE, body),
                "patch a pod": lambda: core.patch_namespaced_pod("any", NAMESPACE, {}),
                **admitted,
            }
            assert _statuses(still_forbidden) == dict.fromkeys(still_forbidden, 403)
            # The field alone, on the Service that opted in, is let through.
            patch("routed", {"spec": {"trafficDistribution": "PreferClose"}})()
        unchanged: Any = admin.read_namespaced_service("not-opted-in", NAMESPACE)
        assert unchanged.spec.traffic_distribution is None
    finally:
        admin.delete_namespaced_service("routed", NAMESPACE)
        admin.delete_namespaced_service("not-opted-in", NAMESPACE)


def test_the_surge_bundle_grants_the_scale_and_the_deletion_cost_and_nothing_more(
    cluster: LocalCluster, installed: Path, tmp_path: Path
) -> None:
    """Without bundle/surge.yaml the ServiceAccount's surge calls are refused; with it they are
    made (the scale as a server-side dry run), and every other write stays refused."""
    admin_apps = client.AppsV1Api(cluster.api_client())
    workload = WorkloadSpec(name="surged", namespace=NAMESPACE, replicas=1)
    cluster.apply(workload_objects(workload))  # no PDB: the Deployment alone
    cluster.wait_ready(NAMESPACE, "surged", 1)
    [pod] = cluster.ready_pods(NAMESPACE, "surged")
    owner = pod["metadata"]["ownerReferences"][0]["name"]
    move = Move(
        pod=f"{NAMESPACE}/{pod['metadata']['name']}",
        workload=f"Deployment/{NAMESPACE}/surged",
        origin={},
        target=Domain(0, ("zone-b",)),
        destination={"zone": "zone-b"},
        node=pod["spec"]["nodeName"],
        target_labels={ZONE_LABEL: "zone-b"},
        controller=("ReplicaSet", owner),
        gain=1.0,
        strategy="split-peers",
        reason="test",
        uid=pod["metadata"]["uid"],
        method="surge",
    )
    record = surge_record(move, 1, [], now=0.0, timeout=60, leader="test")
    api = config.new_client_from_config(config_file=str(installed))  # type: ignore[no-untyped-call]
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
    surge = SurgeClient(api, recorder, None, dry_run=True)
    marking = SurgeClient(api, recorder, None, dry_run=False)
    calls: dict[str, Callable[[], Any]] = {
        "read the scale": lambda: surge.replicas(NAMESPACE, "surged"),
        "scale up (dry run)": lambda: surge.scale_up(record, 0.0),
        "mark the pod": lambda: marking.mark_old_pod(record),
    }
    try:
        with _Component(cluster, tmp_path, "surge") as component:
            for what, call in calls.items():
                with pytest.raises(SurgeError, match="HTTP 403"):
                    call()
                    pytest.fail(f"{what} was allowed without the bundle")
            component.grant()
            wait_until(lambda: surge.replicas(NAMESPACE, "surged") == 1, 30, "the scale readable")
            for call in calls.values():
                call()
            marked: Any = client.CoreV1Api(cluster.api_client()).read_namespaced_pod(
                pod["metadata"]["name"], NAMESPACE
            )
            assert marked.metadata.annotations[DELETION_COST] == LOWEST_COST
            marking.unmark_old_pod(record)
            found: Any = admin_apps.read_namespaced_deployment_scale("surged", NAMESPACE)
            assert found.spec.replicas == 1  # the scale-up was a dry run
            apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
            scale = client.V1Scale(
                metadata=client.V1ObjectMeta(name="surged"), spec=client.V1ScaleSpec(replicas=2)
            )
            still_forbidden: dict[str, Callable[[], Any]] = {
                "patch the Deployment": lambda: apps.patch_namespaced_deployment(
                    "surged", NAMESPACE, {"spec": {"replicas": 2}}
                ),
                "replace the scale": lambda: apps.replace_namespaced_deployment_scale(
                    "surged", NAMESPACE, scale
                ),
                "patch a StatefulSet's scale": lambda: apps.patch_namespaced_stateful_set_scale(
                    "any", NAMESPACE, {"spec": {"replicas": 2}}
                ),
                "delete a pod": lambda: core.delete_namespaced_pod("any", NAMESPACE),
                "patch a Service": lambda: core.patch_namespaced_service("any", NAMESPACE, {}),
            }
            assert _statuses(still_forbidden) == dict.fromkeys(still_forbidden, 403)
    finally:
        admin_apps.delete_namespaced_deployment("surged", NAMESPACE)
