"""`rebalancer`: a thin argparse layer that reads inputs, calls the engine and prints.

Bad input exits 2 and an unavailable data source exits 3, each with one line on stderr that names
the field, file or source; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from rebalancer.engine import CycleOutcome, plan_cycle
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.kube import api_client, list_cluster, read_snapshot
from rebalancer.planner import PlannerState
from rebalancer.policy import Policy, load_policy
from rebalancer.report import outcome_json, outcome_table
from rebalancer.snapshot import load_snapshot
from rebalancer.traffic import (
    PrometheusReader,
    TrafficFailure,
    build_queries,
    load_response_file,
    read_traffic,
)

EXIT_OK = 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalancer", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    plan = commands.add_parser("plan", help="compute one plan and print it; evicts nothing")
    plan.add_argument("--policy", type=Path, help="policy YAML (default: built-in defaults)")
    plan.add_argument("--snapshot", type=Path, help="cluster state, as kubectl get -o json prints")
    plan.add_argument("--traffic", type=Path, help="a saved Prometheus /api/v1/query response")
    plan.add_argument("--kubeconfig", help="read the cluster live (the default without --snapshot)")
    plan.add_argument("--prometheus", help="Prometheus base URL, to read traffic live")
    plan.add_argument(
        "--state",
        type=Path,
        help="planner state JSON to read and update; "
        "without it the persistence gate is not applied",
    )
    plan.add_argument("--output", choices=("table", "json"), default="table")

    snapshot = commands.add_parser("snapshot", help="write the cluster state to a snapshot file")
    snapshot.add_argument("--kubeconfig", help="kubeconfig path (in-cluster config if omitted)")
    snapshot.add_argument("--output", type=Path, required=True)
    return parser


def _read_state(path: Path | None) -> PlannerState:
    if path is None or not path.exists():
        return PlannerState()
    try:
        return PlannerState.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as error:
        raise InputError(f"{path}: not a planner state file ({type(error).__name__})") from None


def _plan(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else Policy()
    queries = build_queries(policy.traffic)
    if args.traffic is not None and args.prometheus:
        raise InputError("plan: give either --traffic FILE or --prometheus URL, not both")
    if args.snapshot is not None and args.kubeconfig:
        raise InputError("plan: give either --snapshot FILE or --kubeconfig PATH, not both")
    if args.traffic is not None:
        answer = load_response_file(args.traffic)
        freshness = None  # a saved answer is judged as of the moment it was saved
    elif args.prometheus:
        reader = PrometheusReader(args.prometheus, policy.traffic.timeout_seconds)
        answer = reader.query(queries.traffic)
        freshness = None if isinstance(answer, TrafficFailure) else reader.query(queries.freshness)
    else:
        raise InputError("plan: give --traffic FILE or --prometheus URL")
    if args.snapshot is not None:
        snapshot = load_snapshot(args.snapshot)
    else:
        snapshot = read_snapshot(api_client(args.kubeconfig))
    traffic = read_traffic(answer, freshness, queries, snapshot, policy.traffic.max_age_seconds)
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
        args.state.write_text(outcome.state.model_dump_json(indent=2), encoding="utf-8")
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
        print(outcome_table(outcome, unit, currency))
    if outcome.failure is not None:
        print(
            f"rebalancer: no moves: traffic {outcome.failure.reason}: {outcome.failure.detail}",
            file=sys.stderr,
        )


def _snapshot(args: argparse.Namespace) -> int:
    document = list_cluster(api_client(args.kubeconfig))
    try:
        args.output.write_text(json.dumps(document, indent=1), encoding="utf-8")
    except OSError as error:
        raise InputError(f"{args.output}: cannot write snapshot ({error.strerror})") from None
    print(f"wrote {len(document['items'])} objects to {args.output}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "plan":
            return _plan(args)
        return _snapshot(args)
    except (InputError, SourceUnavailableError) as error:
        print(f"rebalancer: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
