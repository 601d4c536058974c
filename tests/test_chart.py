"""The Helm chart, checked without a cluster: `helm lint` in each mode, the rendered objects
against golden files and the Kubernetes 1.36 schemas, every reference in the release's
namespace, and its copies of the rules and the dashboard equal to the originals.
tests/e2e/test_chart_install.py installs it. Regenerate the golden files with
`UPDATE_GOLDEN=1 pytest tests/test_chart.py` after a change to the chart, and read the diff."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness.deploy import controller_args, find, helm, objects_of, render_chart
from harness.paths import CHART, REPO, RULES
from rebalancer.cli.parser import build_parser
from rebalancer.config.policy import parse_policy

GOLDEN = Path(__file__).parent / "golden"
MODES: dict[str, dict[str, Any]] = {
    "dry-run": {},
    "evict": {"mode": "evict"},
    "migrate": {"mode": "migrate"},
    "migrate-cert-manager": {"mode": "migrate", "webhook": {"certificates": "cert-manager"}},
    "monitored": {
        "monitoring": {"serviceMonitor": True, "prometheusRule": True, "dashboard": True}
    },
    "routing-apply": {"mode": "evict", "policy": {"routing": {"apply": True}}},
    "surge": {"mode": "migrate", "policy": {"migrate": {"method": "surge"}}},
    "secured-prometheus": {
        "prometheus": {
            "url": "https://mimir.example/prometheus",
            "headers": {"X-Scope-OrgID": "team-a"},
            "auth": {
                "existingSecret": "prometheus-access",
                "bearerTokenKey": "token",
                "caKey": "ca.crt",
            },
        }
    },
}
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "Issuer", "Certificate"}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.parametrize("case", list(MODES))
def test_helm_lint_passes(case: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(MODES[case]))
    linted = subprocess.run(
        [helm(), "lint", "--strict", str(CHART), "--values", str(values)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_packaged_chart_renders_as_the_directory(tmp_path: Path) -> None:
    """What a user installs from a copy: `helm package` keeps every template and file."""
    packaged = subprocess.run(
        [helm(), "package", str(CHART), "--destination", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    [archive] = tmp_path.glob("topology-rebalancer-*.tgz")
    assert str(archive) in packaged.stdout
    for case in ("migrate-cert-manager", "monitored"):
        assert render_chart(MODES[case], chart=archive) == render_chart(MODES[case])


@pytest.mark.parametrize("case", list(MODES))
def test_the_rendering_matches_its_golden_file(case: str) -> None:
    rendered = render_chart(MODES[case])
    golden = GOLDEN / f"chart-{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"chart output changed: see {golden}"


@pytest.mark.parametrize("case", list(MODES))
def test_every_object_is_valid_and_in_the_release_namespace(case: str) -> None:
    """Installed into another namespace, nothing may still point at topology-rebalancer: the
    kustomize base left its RoleBinding subjects, webhook Service, namespaceSelector and
    certificate names there."""
    objects = objects_of(render_chart(MODES[case], namespace="elsewhere"))
    for item in objects:
        if item["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(item, "1.36.0", strict=True)
        if item["kind"] not in CLUSTER_SCOPED:
            assert item["metadata"]["namespace"] == "elsewhere", item["metadata"]["name"]
    text = yaml.safe_dump_all(objects)
    assert "namespace: topology-rebalancer" not in text
    assert ".topology-rebalancer.svc" not in text
    for item in objects:
        for subject in item.get("subjects", ()):
            assert subject["namespace"] == "elsewhere"


@pytest.mark.parametrize("case", list(MODES))
def test_the_controller_runs_its_mode_with_flags_the_cli_takes(case: str) -> None:
    objects = objects_of(render_chart(MODES[case]))
    policy = find(objects, "ConfigMap", "topology-rebalancer-policy")["data"]["policy.yaml"]
    assert parse_policy(policy, case).mode == MODES[case].get("mode", "dry-run")
    env = {"POD_NAMESPACE": "topology-rebalancer"}
    args = build_parser().parse_args(["run", *controller_args(objects, env)])
    assert args.leader_elect and args.policy_configmap.endswith("/topology-rebalancer-policy")
    webhooks = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    assert (
        (args.webhook_port is not None) == bool(webhooks) == (MODES[case].get("mode") == "migrate")
    )
    if case == "secured-prometheus":
        assert args.prometheus_header == ["X-Scope-OrgID:team-a"]
        assert str(args.prometheus_bearer_token_file).endswith("/token")


def test_the_policy_values_reach_the_configmap() -> None:
    values = {"mode": "evict", "policy": {"interval_seconds": 60, "mode": "migrate"}}
    objects = objects_of(render_chart(values))
    text = find(objects, "ConfigMap", "topology-rebalancer-policy")["data"]["policy.yaml"]
    policy = parse_policy(text, "chart")
    assert policy.mode == "evict" and policy.interval_seconds == 60  # the mode value wins


def test_a_bad_mode_fails_the_rendering_naming_the_value() -> None:
    failed = subprocess.run(
        [helm(), "template", "r", str(CHART), "--set", "mode=sideways"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode != 0
    assert "mode: expected dry-run, evict or migrate, got sideways" in failed.stderr


def test_the_charts_copies_of_the_rules_and_the_dashboard_are_the_originals() -> None:
    rule = yaml.safe_load(RULES.read_text())
    copied = yaml.safe_load((CHART / "files" / "prometheusrule-spec.yaml").read_text())
    assert copied == rule["spec"]
    dashboard = (REPO / "dashboards" / "topology-rebalancer.json").read_text()
    assert (CHART / "files" / "dashboard.json").read_text() == dashboard
    policies = yaml.safe_load_all(
        (REPO / "deploy" / "components" / "routing" / "admission-policy.yaml").read_text()
    )
    [policy] = [o for o in policies if o["kind"] == "ValidatingAdmissionPolicy"]
    copied = yaml.safe_load((CHART / "files" / "routing-validations.yaml").read_text())
    assert copied == policy["spec"]["validations"]


def test_the_routing_admission_policy_holds_the_charts_own_service_account() -> None:
    rendered = objects_of(render_chart(MODES["routing-apply"]))
    [policy] = [o for o in rendered if o["kind"] == "ValidatingAdmissionPolicy"]
    [binding] = [o for o in rendered if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    [account] = [o for o in rendered if o["kind"] == "ServiceAccount"]
    user = f"system:serviceaccount:{account['metadata']['namespace']}:{account['metadata']['name']}"
    assert f"'{user}'" in policy["spec"]["matchConditions"][0]["expression"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert not [o for o in objects_of(render_chart(MODES["evict"])) if "Admission" in o["kind"]]
