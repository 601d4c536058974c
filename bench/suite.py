"""What the benchmarks over the scenario suite share: their command line (cycles, seed, where
results go, which scenarios), a measure run on each scenario in turn, and the files written."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "examples" / "scenarios"

Measure = Callable[[Path, int, int], dict[str, Any]]
"""(scenario file, cycles, seed) -> the scenario's figures, with its `seconds`."""


def arguments(
    description: str, cycles: int, more: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The shared command line, and what `more` adds for one benchmark."""
    parser = argparse.ArgumentParser(description=description)
    if more is not None:
        more(parser)
    parser.add_argument("--cycles", type=int, default=cycles)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    return parser.parse_args()


def measure_each(args: argparse.Namespace, measure: Measure) -> list[dict[str, Any]]:
    """The measure on every scenario named (all when none is), printing progress."""
    paths = sorted(SCENARIOS.glob("*.yaml"))
    if args.scenarios:
        paths = [p for p in paths if p.stem in args.scenarios]
    results = []
    for path in paths:
        print(f"{path.stem} ...", flush=True)
        results.append(measure(path, args.cycles, args.seed))
        print(f"  {results[-1]['seconds']} s", flush=True)
    return results


def write(args: argparse.Namespace, name: str, heading: str, text: str, results: Any) -> None:
    """bench/results/NAME.md (the heading and the table) and NAME.json (every figure)."""
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{name}.md").write_text(heading + text + "\n")
    (args.results / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.results / name}.md and {name}.json")
