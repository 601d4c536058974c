"""Line plots of figures over cycles, for `make demo` and `rebalancer simulate --plot`.

matplotlib is imported on first use, from the `sim` extra, so commands that draw nothing never
pay for it and the controller image does without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rebalancer.errors import InputError


def plot_over_cycles(
    cycles: Sequence[int],
    series: Mapping[str, Sequence[float]],
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
) -> None:
    """One line per series against the cycle number, saved as a PNG."""
    require_plotting(path)
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(7, 4))
    for (label, values), marker in zip(series.items(), "os^vD*", strict=False):
        axes.plot(list(cycles), list(values), marker=marker, label=label)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as error:
        raise InputError(f"{path}: cannot write the plot ({error.strerror})") from None
    finally:
        plt.close(figure)


def require_plotting(path: Path) -> None:
    """Refuse a plot at once, before any work is done for it: without the `sim` extra, or into
    a folder that is not there."""
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise InputError(
            f"{path}: plots need matplotlib: pip install 'topology-rebalancer[sim]'"
        ) from None
    if not path.parent.is_dir():
        raise InputError(f"{path}: cannot write the plot (no folder {path.parent})")
