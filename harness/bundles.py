"""`python -m harness.bundles`: writes examples/install/bundle/, each overlay and component of
deploy/ rendered by kustomize, so that a copy of examples/install/ installs without this
repository beside it."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from harness.deploy import OVERLAYS, kustomize
from harness.paths import DEPLOY, EXAMPLES

INSTALL = EXAMPLES / "install"
BUNDLES = INSTALL / "bundle"
COMPONENTS = ("monitoring", "routing", "surge")
MONITORING = DEPLOY / "components" / "monitoring"


def _header(source: str) -> str:
    return (
        f"# {source} of this repository, rendered by `python -m harness.bundles`: edit that, not\n"
        "# this (a test keeps them equal). examples/install/kustomization.yaml installs it.\n"
    )


def render() -> dict[str, str]:
    """Each bundle's file name and text."""
    bundles = {
        f"{overlay}.yaml": _header(f"deploy/overlays/{overlay}")
        + kustomize(DEPLOY / "overlays" / overlay)
        for overlay in OVERLAYS
    }
    for name in COMPONENTS:
        with tempfile.TemporaryDirectory() as scratch:
            # A component cannot be built alone, and kustomize refuses absolute paths to one.
            component = os.path.relpath(DEPLOY / "components" / name, scratch)
            (Path(scratch) / "kustomization.yaml").write_text(f"components: [{component}]\n")
            bundles[f"{name}.yaml"] = _header(f"deploy/components/{name}") + kustomize(
                Path(scratch)
            )
    return bundles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    BUNDLES.mkdir(parents=True, exist_ok=True)
    bundles = render()
    for name, text in bundles.items():
        (BUNDLES / name).write_text(text)
    print(f"wrote {len(bundles)} bundles into examples/install/bundle")


if __name__ == "__main__":
    main()
