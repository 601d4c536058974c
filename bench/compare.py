"""What is quick of every benchmark, each figure beside its committed one, regressions marked:
plan quality on the whole suite (no new optima: those cached are used), one cycle at 1k and 10k
nodes, and the webhook's latency. Run with `make bench-compare` before a change is committed;
it writes nothing to bench/results/ (the full benchmarks do). Quality is deterministic, so any
change beyond 1% is marked; times vary by up to a quarter between runs, so only a change beyond
that is (measure alternately against the code before to tell less)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.quality import CHECKPOINTS, measure_scenario
from bench.runs import RUNS
from bench.suite import ROOT, SCENARIOS
from bench.yardsticks import Cache

RESULTS = ROOT / "bench" / "results"
QUALITY_TOLERANCE = 0.01
TIME_TOLERANCE = 0.25
"""Between two runs of the same code, times here differ by up to a quarter."""
SCALE_SIZES = "1k,10k"


def verdict(committed: float | None, now: float | None, tolerance: float) -> str:
    """For a figure where lower is better."""
    if committed is None or now is None:
        return "new" if committed is None and now is not None else ""
    if now > committed * (1 + tolerance) + 1e-6:
        return "WORSE"
    if now < committed * (1 - tolerance) - 1e-6:
        return "better"
    return ""


def _row(name: str, committed: float | None, now: float | None, mark: str, unit: str = "") -> str:
    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4g}{unit}"

    return f"| {name} | {shown(committed)} | {shown(now)} | {mark} |"


def quality(marks: list[str]) -> Iterator[str]:
    committed = {e["scenario"]: e for e in json.loads((RESULTS / "quality.json").read_text())}
    cache = Cache()
    for path in sorted(SCENARIOS.glob("*.yaml")):
        now = measure_scenario(path, max(CHECKPOINTS), 0, cache, solve_missing=False)
        was = committed.get(path.stem)
        for name in RUNS:
            run_now = now["runs"][name]
            run_was = None if was is None else was["runs"][name]
            figures: list[tuple[str, float | None, float | None]] = [
                (
                    f"cost after {checkpoint}",
                    run_was and run_was["weighted_cost_at"][str(checkpoint)],
                    run_now["weighted_cost_at"][checkpoint],
                )
                for checkpoint in CHECKPOINTS
            ]
            figures.append(("moves", run_was and run_was["moves"], run_now["moves"]))
            violations = sum(run_now["violations"].values())
            figures.append(
                ("violations", run_was and sum(run_was["violations"].values()), violations)
            )
            for figure, before, after in figures:
                mark = verdict(before, after, QUALITY_TOLERANCE)
                marks.append(mark)
                yield _row(f"{path.stem}, {name}: {figure}", before, after, mark)


def _timed(script: str, *args: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as workdir:
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / script), *args, "--results", workdir],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found: dict[str, Any] = json.loads(
            (Path(workdir) / script.replace(".py", ".json")).read_text()
        )
        return found


def scale(marks: list[str]) -> Iterator[str]:
    committed = {
        (r["size"], r["granularity"]): r
        for r in json.loads((RESULTS / "scale.json").read_text())["rows"]
    }
    now = _timed("scale.py", "--sizes", SCALE_SIZES, "--repeats", "1")
    for row in now["rows"]:
        was = committed.get((row["size"], row["granularity"]), {})
        label = f"{row['size']} nodes, {row['granularity']} traffic"
        for figure, tolerance, unit in (
            ("cycle_seconds", TIME_TOLERANCE, " s"),
            ("lifted_plan_seconds", TIME_TOLERANCE, " s"),
            ("peak_rss_mib", QUALITY_TOLERANCE * 5, " MiB"),
        ):
            mark = verdict(was.get(figure), row[figure], tolerance)
            marks.append(mark)
            yield _row(f"{label}: {figure}", was.get(figure), row[figure], mark, unit)


def webhook(marks: list[str]) -> Iterator[str]:
    was = json.loads((RESULTS / "webhook.json").read_text())
    now = _timed("webhook.py")
    for group, figure in (
        ("quiet", "p50_ms"),
        ("quiet", "p99_ms"),
        ("with_silent", "p99_ms"),
    ):
        mark = verdict(was[group][figure], now[group][figure], TIME_TOLERANCE)
        marks.append(mark)
        yield _row(f"webhook {group}: {figure}", was[group][figure], now[group][figure], mark)
    for figure in ("peak_rss_small_mib", "peak_rss_large_mib"):
        mark = verdict(was[figure], now[figure], 0.05)
        marks.append(mark)
        yield _row(f"webhook: {figure}", was[figure], now[figure], mark, " MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "parts", nargs="*", default=["quality", "scale", "webhook"], help="which benchmarks"
    )
    args = parser.parse_args()
    parts = {"quality": quality, "scale": scale, "webhook": webhook}
    marks: list[str] = []
    print("| figure | committed | now | |\n|---|---:|---:|---|", flush=True)
    for name in args.parts:
        for line in parts[name](marks):
            print(line, flush=True)
    worse, better = marks.count("WORSE"), marks.count("better")
    print(f"\n{worse} figure(s) worse than committed, {better} better, of {len(marks)}")


if __name__ == "__main__":
    main()
