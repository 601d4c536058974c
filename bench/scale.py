"""One planning cycle on large synthetic clusters, stage by stage, against a parsing floor.

For each size (1k nodes / 10k pods / 100k pairs up to 10k / 100k / 1M) and each granularity (pod
traffic as Hubble labels it, workload traffic as Istio does) the generator writes the List a
snapshot is parsed from and the recorded `/api/v1/query` answer. A fresh process then runs the
cycle's stages in order, timing each and reading the peak RSS when it ends: parsing the answer,
building the snapshot, mapping traffic to pods, weighing routing, building the graph and cost
model, each strategy, gathering jobs' moves, the target placement, planning (with advancing
the persistence streaks) and finding gangs another scheduler owns, as `plan_cycle` does. The
whole cycle is their sum. Other fresh processes measure the floor: decoding the same answer
with a fast JSON parser and doing nothing else, for each of orjson and msgspec's untyped
decoder; the floor is the faster one's. The List is decoded the same way for a second floor:
a cycle must read both inputs, so the sum of the two floors is the least any cycle could take,
which the issue's floor (the answer alone) leaves out; with workload traffic the answer is
small and the List is most of what is read.
All run with the cyclic garbage collector paused, as the controller runs its cycle (see
`collector_paused`), three times by default; the run with the median time is kept. Run with
`make bench-scale`; writes bench/results/scale.md, scale.json and scale.png.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import orjson

from harness.process import peak_rss_mib
from harness.synthetic import Size, generate
from rebalancer.clients.inputs import RecordedAnswer, TrafficInput
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import decode_snapshot
from rebalancer.cluster.topology import Topology
from rebalancer.config.pacing import Limits
from rebalancer.config.policy import Policy, parse_policy
from rebalancer.config.resolved import PlanningRules, price_of
from rebalancer.cost.figures import Figures
from rebalancer.cost.routing import RoutingAdvice, changes
from rebalancer.planning.cycle import (
    build_view,
    collector_paused,
    cost_model,
    gang_level,
    routing_advice,
    service_calls,
    target_levels,
    topology_of,
)
from rebalancer.planning.jobs import Job, whole_jobs
from rebalancer.planning.owned_gangs import owned_gangs
from rebalancer.planning.planner import plan
from rebalancer.planning.state import PlannerState
from rebalancer.planning.target import proposals, target_placement
from rebalancer.planning.target_search import Target
from rebalancer.planning.types import Plan
from rebalancer.simulator.run import DEFAULT_POLICY
from rebalancer.strategies.framework import Candidate, ClusterView
from rebalancer.strategies.registry import STRATEGIES
from rebalancer.traffic.model import Traffic, TrafficFailure

SIZES = {
    "1k": Size("1k", nodes=1_000, pods=10_000, pairs=100_000),
    "5k": Size("5k", nodes=5_000, pods=50_000, pairs=500_000),
    "10k": Size("10k", nodes=10_000, pods=100_000, pairs=1_000_000),
}
GRANULARITIES = ("pod", "workload")
SOURCES = {
    "pod": "traffic: {source: hubble}\n",
    "workload": "traffic: {source: istio}\nthresholds: {min_pair_rate: 0.1, min_gain: 1}\n",
}
"""The built-in simulation policy (zone, rack and host; split-peers and gang-consolidation) with
the source whose labels the answer carries. The workload answer sums the pod answer's rates,
which are counts, not the bytes Istio counts: its thresholds are the counts' defaults."""

_ROUTING_KINDS = frozenset({"Service", "EndpointSlice"})
ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


class Stages:
    def __init__(self) -> None:
        self.figures: list[dict[str, Any]] = []

    def run(self, name: str, work: Callable[[], T]) -> T:
        started = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - started
        self.figures.append({"stage": name, "seconds": seconds, "peak_rss_mib": peak_rss_mib()})
        return result


@collector_paused()
def measure_cycle(
    cluster_path: Path, answer_path: Path, granularity: str, plan_around: bool, lifted: bool
) -> dict[str, Any]:
    """The stages of one cycle, in the order the controller runs them, with the collector paused
    as the controller and `rebalancer plan` pause it. With `plan_around`, the two routing
    stages that only that setting runs (the traffic rerouted, the figures as routed now). With
    `lifted`, the plan with every limit lifted after it."""
    text = DEFAULT_POLICY + SOURCES[granularity]
    text += f"routing: {{plan_around: {str(plan_around).lower()}}}\n"
    policy: Policy = parse_policy(text, "bench policy")
    cluster_bytes = cluster_path.read_bytes()
    source = TrafficInput(policy.traffic, RecordedAnswer(answer_path.read_bytes(), "answer"))
    stages = Stages()
    answers = stages.run("parse answer", source.answers)
    samples = answers[0]
    snapshot = stages.run("build snapshot", lambda: decode_snapshot(cluster_bytes, "x"))
    traffic = stages.run("map traffic to pods", lambda: source.mapped(answers, snapshot))
    if isinstance(traffic, TrafficFailure):
        raise SystemExit(f"bench: the synthetic answer was refused: {traffic.detail}")
    topology = topology_of(policy, snapshot)
    # The advice is kept to the end, as the cycle's outcome keeps it.
    _advice, planned = _weigh_routing(
        stages, policy, snapshot, traffic, topology, plan_around=plan_around
    )
    view = stages.run("build graph", lambda: build_view(policy, snapshot, planned, topology))
    candidates: list[Candidate] = []
    for config in policy.strategies:
        strategy = STRATEGIES[config.name].build(config.args)
        candidates += stages.run(f"strategy {config.name}", partial(strategy.propose, view))

    rules = PlanningRules.of(policy, view.topology)
    jobs: dict[str, Job] = {}
    if policy.jobs.whole:
        candidates, jobs = stages.run(
            "jobs", lambda: whole_jobs(view, candidates, rules, PlannerState().last_moved, 0.0)
        )
    levels = target_levels(policy, view.topology) if rules.steered else None
    target = None
    if levels is not None:
        leads = [c.pod for c in sorted(candidates, key=lambda c: -c.gain)]
        target = stages.run(
            "target placement",
            lambda: target_placement(view, rules, PlannerState(), 0.0, levels=levels, leads=leads),
        )
        candidates += proposals(target, view.cost)

    def observe_and_plan() -> tuple[PlannerState, Plan]:
        """As `plan_cycle` does: the streaks advanced by this cycle's candidates, then the plan."""
        state = PlannerState().observe(candidates)
        return state, plan(
            view,
            candidates,
            rules,
            state,
            now=0.0,
            persistence_required=1,
            jobs=jobs,
            target=target,
        )

    state, result = stages.run("plan", observe_and_plan)
    stages.run("owned gangs", lambda: owned_gangs(view, gang_level(policy, view.topology)))

    def figures_today() -> Figures | None:
        """The traffic as routed now, which the plan's own figures are not once rerouted."""
        if planned is traffic:
            return None
        actual = cost_model(policy, snapshot, traffic, topology)
        return actual.tally(snapshot).figures(topology, price_of(policy, topology))

    if plan_around:
        stages.run("routing: figures as routed now", figures_today)
    cycle_seconds, cycle_peak = sum(f["seconds"] for f in stages.figures), peak_rss_mib()
    beyond: dict[str, Any] = {}
    if lifted:
        beyond = _beyond(
            policy, view, candidates, state=state, jobs=jobs, target=target, levels=levels
        )
    return {
        "stages": stages.figures,
        "cycle_seconds": cycle_seconds,
        **beyond,
        "peak_rss_mib": cycle_peak,
        "series": len(samples) if isinstance(samples, list) else 0,
        "pod_pairs": view.cost.edge_count(),
        "candidates": len(candidates),
        "moves": len(result.moves),
    }


def _beyond(
    policy: Policy,
    view: ClusterView,
    candidates: list[Candidate],
    *,
    state: PlannerState,
    jobs: dict[str, Job],
    target: Target | None,
    levels: range | None,
) -> dict[str, Any]:
    """Outside the cycle's sum: the plan with every limit lifted, and the next cycle's target
    placement on the same inputs, resumed from this cycle's target, as the controller runs it
    from its second cycle on."""
    nothing = policy.model_copy(update={"limits": Limits(**dict.fromkeys(Limits.model_fields))})
    started = time.perf_counter()
    lifted_rules = PlanningRules.of(nothing, view.topology)
    moves = plan(
        view,
        candidates,
        lifted_rules,
        state,
        now=0.0,
        persistence_required=1,
        jobs=jobs,
        target=target,
    ).moves
    figures: dict[str, Any] = {
        "lifted_plan_seconds": time.perf_counter() - started,
        "lifted_moves": len(moves),
    }
    if levels is not None and target is not None:
        kept = {pod: domain.key for pod, domain in target.places.items()}
        rules = PlanningRules.of(policy, view.topology)
        started = time.perf_counter()
        target_placement(view, rules, state.model_copy(update={"target": kept}), 0.0, levels=levels)
        figures["target_next_seconds"] = time.perf_counter() - started
    return figures


def _weigh_routing(
    stages: Stages,
    policy: Policy,
    snapshot: Snapshot,
    traffic: Traffic,
    topology: Topology,
    *,
    plan_around: bool,
) -> tuple[tuple[RoutingAdvice, ...], Traffic]:
    """As `weigh_routing` in plan_cycle, stage by stage: the calls to each Service, the advice,
    and with plan_around the traffic as the recommended routing would send it, for the moves.
    The calls are let go on return, as there."""
    price = price_of(policy, topology)
    calls = stages.run("routing: calls", lambda: service_calls(policy, snapshot, traffic))
    advice = stages.run("routing: advice", lambda: routing_advice(policy, calls, price))

    def reroute() -> Traffic:
        assumed = changes(advice, snapshot)
        return calls.rerouted(assumed) if assumed and calls is not None else traffic

    return advice, stages.run("routing: reroute", reroute) if plan_around else traffic


FLOOR_PARSERS: dict[str, Callable[[bytes], Any]] = {
    "orjson": orjson.loads,
    "msgspec": msgspec.json.decode,
}
"""The fastest JSON parsers to hand, each decoding into plain dicts and lists; which is faster
depends on the answer, so the floor is measured with each."""


@collector_paused()
def measure_floor(answer_path: Path, parser: str) -> dict[str, Any]:
    """Under the same pause: the collector would otherwise take most of the floor's time."""
    answer_bytes = answer_path.read_bytes()
    started = time.perf_counter()
    FLOOR_PARSERS[parser](answer_bytes)
    return {"floor_seconds": time.perf_counter() - started, "peak_rss_mib": peak_rss_mib()}


def _in_fresh_process(*args: str) -> dict[str, Any]:
    """Each measurement in its own interpreter, so one run's peak RSS is not another's."""
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def _median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose `key` is the median: on a shared 2-core machine one run of the same cycle
    varied by a quarter, every stage and the floor alike."""
    return sorted(runs, key=lambda run: float(run[key]))[len(runs) // 2]


def _floors(path: Path, repeats: int) -> dict[str, float]:
    """Each parser's median time to decode `path`, each run in a fresh process."""
    return {
        parser: _median_run(
            [_in_fresh_process("--floor", str(path), parser) for _ in range(repeats)],
            "floor_seconds",
        )["floor_seconds"]
        for parser in FLOOR_PARSERS
    }


def measure_size(
    size: Size, seed: int, workdir: Path, repeats: int, plan_around: bool
) -> list[dict[str, Any]]:
    started = time.perf_counter()
    synthetic = generate(size, seed)
    cluster_path = workdir / f"{size.name}-cluster.json"
    cluster_path.write_text(json.dumps(synthetic.cluster))
    # The same cluster without its Services: what the cycle costs when there is no routing
    # to weigh, on the same code (the routing stages find nothing to do).
    bare_path = workdir / f"{size.name}-cluster-without-services.json"
    bare = [item for item in synthetic.cluster["items"] if item["kind"] not in _ROUTING_KINDS]
    bare_path.write_text(json.dumps({**synthetic.cluster, "items": bare}))
    answers = {"pod": synthetic.pod_response(), "workload": synthetic.workload_response()}
    paths = {}
    for granularity, answer in answers.items():
        paths[granularity] = workdir / f"{size.name}-{granularity}.json"
        paths[granularity].write_text(json.dumps(answer))
    print(f"{size.name}: generated in {time.perf_counter() - started:.1f}s", flush=True)
    del synthetic, answers
    list_floors = _floors(cluster_path, repeats)
    list_parser = min(list_floors, key=list_floors.__getitem__)
    rows = []
    around = ["--plan-around"] if plan_around else []
    for granularity in GRANULARITIES:
        floors = _floors(paths[granularity], repeats)
        cycles = [
            _in_fresh_process(
                "--cycle", str(cluster_path), str(paths[granularity]), granularity, *around
            )
            for _ in range(repeats)
        ]
        cycle = _median_run(cycles, "cycle_seconds")
        without = [
            _in_fresh_process(
                "--cycle", str(bare_path), str(paths[granularity]), granularity, "--not-lifted"
            )["cycle_seconds"]
            for _ in range(repeats)
        ]
        fastest = min(floors, key=floors.__getitem__)
        row = {
            "size": size.name,
            "nodes": size.nodes,
            "pods": size.pods,
            "granularity": granularity,
            "answer_mib": paths[granularity].stat().st_size / 2**20,
            **cycle,
            "floor_seconds": floors[fastest],
            "floor_parser": fastest,
            "floor_by_parser": floors,
            "list_floor_seconds": list_floors[list_parser],
            "list_floor_parser": list_parser,
            "cycle_runs": sorted(run["cycle_seconds"] for run in cycles),
            "without_services_seconds": sorted(without)[len(without) // 2],
            "without_services_runs": sorted(without),
        }
        print(
            f"  {granularity}: median cycle {row['cycle_seconds']:.1f}s of {repeats}, floor "
            f"{row['floor_seconds']:.2f}s ({fastest}), List floor "
            f"{row['list_floor_seconds']:.2f}s, peak {row['peak_rss_mib']:.0f} MiB, "
            f"without Services {row['without_services_seconds']:.1f}s",
            flush=True,
        )
        rows.append(row)
    return rows


def growth_exponent(rows: list[dict[str, Any]], granularity: str) -> float | None:
    """log(time ratio) / log(size ratio) between the smallest and largest pod counts."""
    chosen = sorted((r for r in rows if r["granularity"] == granularity), key=lambda r: r["pods"])
    if len(chosen) < 2:
        return None
    first, last = chosen[0], chosen[-1]
    return math.log(last["cycle_seconds"] / first["cycle_seconds"]) / math.log(
        last["pods"] / first["pods"]
    )


def table(rows: list[dict[str, Any]]) -> str:
    names = [figure["stage"] for figure in rows[0]["stages"]]
    lines = [
        "| size | traffic | series | pod pairs | "
        + " | ".join(names)
        + " | cycle (s) | all runs (s) | floor (s) | floor parser | cycle / floor "
        "| List floor (s) | cycle / both floors | peak RSS (MiB) "
        "| plan, limits lifted (s) | moves, limits lifted | target placement, next cycle (s) "
        "| cycle without Services (s) | Services' cost |",
        "|---|---|---:|---:|"
        + "---:|" * len(names)
        + "---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        seconds = {figure["stage"]: figure["seconds"] for figure in row["stages"]}
        lines.append(
            f"| {row['size']} ({row['nodes']} nodes, {row['pods']} pods) | {row['granularity']} "
            f"| {row['series']} | {row['pod_pairs']} | "
            + " | ".join(f"{seconds[name]:.2f}" for name in names)
            + f" | {row['cycle_seconds']:.2f} | "
            + ", ".join(f"{run:.1f}" for run in row["cycle_runs"])
            + f" | {row['floor_seconds']:.2f} | {row['floor_parser']} "
            f"| {row['cycle_seconds'] / row['floor_seconds']:.1f}x "
            f"| {row['list_floor_seconds']:.2f} "
            f"| {row['cycle_seconds'] / (row['floor_seconds'] + row['list_floor_seconds']):.1f}x "
            f"| {row['peak_rss_mib']:.0f} "
            f"| {row['lifted_plan_seconds']:.2f} | {row['lifted_moves']} "
            f"| {row.get('target_next_seconds', 0.0):.2f} "
            f"| {row['without_services_seconds']:.2f} "
            f"| {row['cycle_seconds'] / row['without_services_seconds'] - 1:+.0%} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(9, 4))
    for granularity, marker, color in zip(GRANULARITIES, "os", ("C0", "C2"), strict=True):
        chosen = sorted(
            (r for r in rows if r["granularity"] == granularity), key=lambda r: r["pods"]
        )
        pods = [r["pods"] for r in chosen]
        cycle = [r["cycle_seconds"] for r in chosen]
        floor = [r["floor_seconds"] for r in chosen]
        axes.plot(pods, cycle, marker=marker, color=color, label=f"cycle, {granularity} traffic")
        both = [r["floor_seconds"] + r["list_floor_seconds"] for r in chosen]
        axes.plot(
            pods, floor, marker=marker, color=color, linestyle=":", label=f"floor, {granularity}"
        )
        axes.plot(
            pods,
            both,
            marker=marker,
            color=color,
            linestyle="--",
            label=f"both floors, {granularity}",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("pods")
    axes.set_ylabel("seconds")
    axes.set_title("One planning cycle against the parsing floors")
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1))  # six lines: beside, not over
    axes.grid(alpha=0.3, which="both")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    if sys.argv[1:2] == ["--cycle"]:
        cluster, answer, granularity = sys.argv[2:5]
        flags = sys.argv[5:]
        measured = measure_cycle(
            Path(cluster),
            Path(answer),
            granularity,
            "--plan-around" in flags,
            lifted="--not-lifted" not in flags,
        )
        print(json.dumps(measured))
        return
    if sys.argv[1:2] == ["--floor"]:
        print(json.dumps(measure_floor(Path(sys.argv[2]), sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated: 1k,5k,10k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="runs per cycle; the median is kept")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--plan-around",
        action="store_true",
        help="with routing.plan_around (off by default): its two stages measured too",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir:
        for name in args.sizes.split(","):
            rows += measure_size(
                SIZES[name], args.seed, Path(workdir), args.repeats, args.plan_around
            )
    text = table(rows)
    exponents = {g: growth_exponent(rows, g) for g in GRANULARITIES}
    notes = "\n".join(
        f"- growth exponent of the cycle time, {g} traffic: " + ("n/a" if e is None else f"{e:.2f}")
        for g, e in exponents.items()
    )
    print(text + "\n" + notes)
    args.results.mkdir(parents=True, exist_ok=True)
    heading = (
        f"# One planning cycle at scale, seed {args.seed}\n\n"
        "Written by `make bench-scale`, with the default policy"
        + (" and `routing.plan_around: true`" if args.plan_around else "")
        + ". Seconds per stage, each measured in a fresh process; the "
        f"cycle is their sum. Each cycle and floor ran {args.repeats} times; the table shows the "
        "run with the median time, and every run's cycle time. The floor decodes the same "
        "answer with a fast JSON parser and does nothing else; it was measured with each of "
        f"{' and '.join(FLOOR_PARSERS)} (the median of its runs), and the faster is shown. "
        "The cycle also reads the cluster's List, which that floor leaves out: the List floor "
        "decodes the List the same way, and the last ratio is the cycle against the sum of "
        "both floors, the least any cycle that reads both inputs could take. "
        "After the cycle the same process plans "
        "again with every limit lifted (`limits` all null), outside the cycle's sum: with no "
        "limit to stop it the planner judges every candidate, which is where a scan of the "
        "cluster per candidate would show; then it makes the next cycle's target placement on "
        "the same inputs, resumed from this cycle's target, as from a controller's second cycle "
        "on. The cycle without Services runs the same code on "
        "the same cluster with its Services and EndpointSlices left out of the List (median "
        "of as many runs): what reading them and weighing routing add. "
        "Both run with the cyclic garbage collector paused, as the controller runs its cycle. "
        "Peak RSS is the cycle process's.\n\n"
    )
    (args.results / "scale.md").write_text(heading + text + "\n\n" + notes + "\n")
    (args.results / "scale.json").write_text(
        json.dumps({"rows": rows, "growth_exponent": exponents}, indent=2) + "\n"
    )
    plot(rows, args.results / "scale.png")
    print(f"wrote {args.results / 'scale.md'}, scale.json and scale.png")


if __name__ == "__main__":
    main()
