"""Which build is running, for `--version`, the build_info metric and the start log line."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "topology-rebalancer"


def running_version() -> str:
    """The installed distribution's version; "unknown" when run from a checkout not installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
