"""The commands that read once and print: `plan`, `simulate`, `snapshot`, `topology`, `policy`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from rebalancer.cli.parser import prometheus_access
from rebalancer.clients.inputs import AnswerReader, RecordedAnswer, TrafficInput, load_snapshot
from rebalancer.clients.kube_api import api_client, list_cluster, read_snapshot
from rebalancer.clients.prometheus import PrometheusReader
from rebalancer.cluster.model import Snapshot
from rebalancer.config.policy import Policy, load_policy, parse_policy
from rebalancer.errors import EXIT_OK, InputError, SourceUnavailableError, printable
from rebalancer.files import LARGE_INPUT_BYTES, read_text
from rebalancer.planning.cycle import CycleOutcome, collector_paused, plan_cycle, topology_of
from rebalancer.planning.report import (
    outcome_json,
    outcome_table,
    topology_json,
    topology_table,
)
from rebalancer.planning.state import PlannerState
from rebalancer.simulator.plots import plot_over_cycles, require_plotting
from rebalancer.simulator.results import result_json, result_table
from rebalancer.simulator.run import DEFAULT_POLICY, simulate
from rebalancer.simulator.scenario import Scenario, load_scenario


def _cluster_source(args: argparse.Namespace, command: str) -> Callable[[], Snapshot]:
    """How the command reads the cluster, --snapshot FILE or live; both given is refused now,
    before anything is read."""
    if args.snapshot is not None and args.kubeconfig:
        raise InputError(f"{command}: give either --snapshot FILE or --kubeconfig PATH, not both")
    if args.snapshot is not None:
        return lambda: load_snapshot(args.snapshot)
    return lambda: read_snapshot(api_client(args.kubeconfig))


def _read_state(path: Path | None) -> PlannerState:
    if path is None or not path.exists():
        return PlannerState()
    text = read_text(path, "planner state file", LARGE_INPUT_BYTES)
    try:
        return PlannerState.model_validate_json(text)
    except ValidationError as error:
        raise InputError(f"{path}: not a planner state file ({type(error).__name__})") from None


@collector_paused()
def plan(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else Policy()
    if args.traffic is not None and args.prometheus:
        raise InputError("plan: give either --traffic FILE or --prometheus URL, not both")
    read_cluster = _cluster_source(args, "plan")
    reader: AnswerReader
    if args.traffic is not None:
        reader = RecordedAnswer.from_file(args.traffic)
    elif args.prometheus:
        access = prometheus_access(args)
        reader = PrometheusReader(args.prometheus, policy.traffic.timeout_seconds, access)
    else:
        raise InputError("plan: give --traffic FILE or --prometheus URL")
    source = TrafficInput(policy.traffic, reader)
    answers = source.answers()
    snapshot = read_cluster()
    traffic = source.mapped(answers, snapshot)
    state = _read_state(args.state)
    outcome = plan_cycle(
        policy,
        snapshot,
        traffic,
        state,
        now=time.time(),
        persistence_required=None if args.state else 1,
    )
    if args.state is not None:
        try:
            args.state.write_text(outcome.state.stored(indent=2), encoding="utf-8")
        except OSError as error:
            raise InputError(
                f"{args.state}: cannot write planner state ({error.strerror})"
            ) from None
    _print(outcome, policy, args.output)
    if outcome.failure is not None:
        return (
            InputError.exit_code
            if outcome.failure.reason == "bad-query"
            else (SourceUnavailableError.exit_code)
        )
    return EXIT_OK


def _print(outcome: CycleOutcome, policy: Policy, output: str) -> None:
    unit, currency = policy.traffic.unit, policy.price.currency
    if output == "json":
        print(json.dumps(outcome_json(outcome, unit, currency), indent=2))
    else:
        print(printable(outcome_table(outcome, unit, currency)))
    if outcome.failure is not None:
        print(
            printable(
                f"rebalancer: no moves: traffic {outcome.failure.reason}: {outcome.failure.detail}"
            ),
            file=sys.stderr,
        )


def simulate_command(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(Scenario.model_json_schema(), indent=2))
        return EXIT_OK
    if args.scenario is None:
        raise InputError("simulate: give a SCENARIO file, or --schema")
    if args.cycles < 1:
        raise InputError(f"simulate: --cycles must be at least 1, got {args.cycles}")
    if args.plot is not None:
        require_plotting(args.plot)
    scenario = load_scenario(args.scenario)
    policy = load_policy(args.policy) if args.policy else parse_policy(DEFAULT_POLICY, "built-in")
    result = simulate(
        scenario,
        policy,
        cycles=args.cycles,
        mode=args.mode,
        seed=args.seed,
        optimum=args.optimum,
        moves=args.moves,
        routing=args.routing == "apply",
    )
    if args.output == "json":
        print(json.dumps(result_json(result), indent=2))
    else:
        print(printable(result_table(result)))
    if args.plot is not None:
        rows = result.cycles
        series = {
            f"crossing {level}": [row.crossing[level] for row in rows] for level in rows[0].crossing
        }
        plot_over_cycles(
            [row.cycle for row in rows],
            series,
            args.plot,
            title=f"rebalancer simulate: {scenario.name}, {args.mode} mode",
            xlabel="cycle (0: the starting placement)",
            ylabel=f"traffic ({policy.traffic.unit})",
        )
    return EXIT_OK


def snapshot(args: argparse.Namespace) -> int:
    document = list_cluster(api_client(args.kubeconfig))
    try:
        args.output.write_text(json.dumps(document, indent=1), encoding="utf-8")
    except OSError as error:
        raise InputError(f"{args.output}: cannot write snapshot ({error.strerror})") from None
    print(printable(f"wrote {len(document['items'])} objects to {args.output}"))
    return EXIT_OK


def topology(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else Policy()
    found = topology_of(policy, _cluster_source(args, "topology")())
    if args.output == "json":
        print(json.dumps(topology_json(found), indent=2))
    else:
        print(printable(topology_table(found)))
    return EXIT_OK


def policy(args: argparse.Namespace) -> int:
    if args.policy_command == "schema":
        print(json.dumps(Policy.json_schema(), indent=2))
        return EXIT_OK
    checked = load_policy(args.file)
    levels = ", ".join(level.name for level in checked.topology.resolved_levels)
    print(printable(f"{args.file}: a valid policy (mode {checked.mode}; levels {levels})"))
    return EXIT_OK
