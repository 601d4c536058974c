"""The package's own surface: `import rebalancer` stays light, and its public names resolve."""

from __future__ import annotations

import subprocess
import sys

import pytest

import rebalancer

HEAVY = ("numpy", "pydantic", "networkx", "kubernetes", "msgspec", "yaml", "rebalancer.planning")


def test_import_rebalancer_loads_nothing_heavy() -> None:
    code = "import sys, rebalancer; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert [name for name in loaded if name.startswith(HEAVY)] == []


@pytest.mark.parametrize("name", rebalancer.__all__)
def test_public_names_resolve(name: str) -> None:
    assert getattr(rebalancer, name).__name__ == name


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = rebalancer.no_such_name
