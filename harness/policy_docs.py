"""`python -m harness.policy_docs`: writes the policy reference into docs/policy.md and the
default policies under deploy/, rendered from the model by `rebalancer.config.reference`."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.paths import DEPLOY, REPO
from rebalancer.config.policy import Mode
from rebalancer.config.reference import default_policy_configmap, with_reference

POLICY_DOC = REPO / "docs" / "policy.md"
DEFAULT_POLICY = DEPLOY / "base" / "policy.yaml"
OVERLAY_POLICIES: dict[Mode, Path] = {
    mode: DEPLOY / "overlays" / mode / "policy.yaml" for mode in ("evict", "migrate")
}
"""The overlays' policies: the defaults but for the mode, as patches over the base ConfigMap."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    POLICY_DOC.write_text(with_reference(POLICY_DOC.read_text()))
    DEFAULT_POLICY.write_text(default_policy_configmap())
    for mode, path in OVERLAY_POLICIES.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(default_policy_configmap(mode))
    print(f"wrote the policy reference into {POLICY_DOC.name} and the policies under deploy/")


if __name__ == "__main__":
    main()
