"""deploy/ and the chart as the tests see them: each overlay built by kustomize (kubectl's own,
from the test binaries), the chart rendered by helm (built the same way), and the controller's
flags read back from its Deployment."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness.cluster import build_binaries
from harness.paths import CHART, DEPLOY
from harness.process import wait_until

OVERLAY_MODES = {
    "dry-run": "dry-run",
    "evict": "evict",
    "migrate": "migrate",
    "migrate-cert-manager": "migrate",
}
"""Each overlay, and the mode its policy sets."""
OVERLAYS = tuple(OVERLAY_MODES)


def kubectl() -> str:
    return str(build_binaries() / "kubectl")


def helm() -> str:
    return str(build_binaries() / "helm")


def install_crds(kubeconfig: Path, directories: list[Path]) -> None:
    """Apply each directory of CRDs, then wait until the API server serves them all."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [kubectl(), "--kubeconfig", str(kubeconfig), *args]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)

    for crds in directories:
        applied = run("apply", "--server-side", "-f", str(crds))
        assert applied.returncode == 0, applied.stderr
    for crds in directories:
        # A CRD just made may have no conditions yet, which `kubectl wait` takes for an error.
        wait_until(
            lambda c=crds: (
                run(  # type: ignore[misc]
                    "wait", "--for=condition=Established", "--timeout=30s", "-f", str(c)
                ).returncode
                == 0
            ),
            90,
            f"the CRDs of {crds.name} established",
        )


def render_chart(
    values: dict[str, Any],
    namespace: str = "topology-rebalancer",
    release: str = "rebalancer",
    chart: Path = CHART,
) -> str:
    """`helm template` of `chart` (a directory or a packaged chart) with `values` (as
    --set-json each), as text."""
    flags = [f"--set-json={key}={json.dumps(value)}" for key, value in values.items()]
    rendered = subprocess.run(
        [helm(), "template", release, str(chart), "--namespace", namespace, *flags],
        capture_output=True,
        text=True,
        check=True,
    )
    return rendered.stdout


def objects_of(rendered: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def kustomize(directory: Path) -> str:
    """`kubectl kustomize DIRECTORY`, as the text it prints."""
    built = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=True
    )
    return built.stdout


def build_overlay(overlay: str) -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/overlays/OVERLAY`, as the list of objects it prints."""
    return objects_of(kustomize(DEPLOY / "overlays" / overlay))


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def controller_args(
    objects: list[dict[str, Any]], env: dict[str, str], name: str = "topology-rebalancer"
) -> list[str]:
    """The Deployment's args with $(VAR) expanded from `env`, as the kubelet would."""
    [container] = find(objects, "Deployment", name)["spec"]["template"]["spec"]["containers"]
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in container["args"]]
