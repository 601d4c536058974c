"""`rebalancer`: a thin argparse layer that reads inputs, runs the cycle or the controller, and
prints.

Bad input exits 2 and an unavailable data source exits 3, each with one line on stderr that names
the field, file or source; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from rebalancer.clients.configmaps import parse_reference
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.clients.inputs import AnswerReader, RecordedAnswer, TrafficInput, load_snapshot
from rebalancer.clients.kube_api import ApiClient, api_client, list_cluster, read_snapshot
from rebalancer.clients.leadership import run_as_candidate
from rebalancer.clients.prometheus import PrometheusReader
from rebalancer.clients.stores import ConfigMapPolicy, ConfigMapState, FixedPolicy
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.config.policy import Policy, load_policy, parse_policy
from rebalancer.controller.logs import configure as configure_logging
from rebalancer.controller.loop import Controller, PolicySource
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.controller.metrics import serve as serve_metrics
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.planning.cycle import CycleOutcome, collector_paused, plan_cycle
from rebalancer.planning.report import outcome_json, outcome_table
from rebalancer.planning.state import PlannerState
from rebalancer.simulator.plots import plot_over_cycles, require_plotting
from rebalancer.simulator.results import result_json, result_table
from rebalancer.simulator.run import DEFAULT_POLICY, simulate
from rebalancer.simulator.scenario import Scenario, load_scenario
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.serving_keys import issued_serving_keys, shared_serving_keys
from rebalancer.webhook.tls import ServingKeys

EXIT_OK = 0
KEY_REFRESH_SECONDS = 3600
"""How often each replica rereads the shared webhook Secret: far inside the renewal margin."""


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

    run = commands.add_parser("run", help="the controller: plan and act every interval")
    run.add_argument("--kubeconfig", help="kubeconfig path (in-cluster config if omitted)")
    run.add_argument("--prometheus", required=True, help="Prometheus base URL")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--policy", type=Path, help="policy YAML, read once (local runs)")
    source.add_argument(
        "--policy-configmap",
        metavar="NAMESPACE/NAME",
        help="ConfigMap whose policy.yaml is re-read every cycle",
    )
    run.add_argument(
        "--state-configmap",
        metavar="NAMESPACE/NAME",
        required=True,
        help="ConfigMap that keeps cooldowns and persistence across restarts",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="port for /metrics, /healthz and /readyz (0: pick a free one)",
    )
    run.add_argument("--metrics-address", default="0.0.0.0")
    run.add_argument(
        "--webhook-port", type=int, help="serve the migrate-mode webhook (HTTPS) on this port"
    )
    run.add_argument(
        "--webhook-config",
        default="topology-rebalancer",
        help="our MutatingWebhookConfiguration, whose caBundle is patched at start",
    )
    run.add_argument(
        "--webhook-names",
        default="localhost",
        help="comma-separated DNS names for the webhook certificate (the Service's names)",
    )
    run.add_argument(
        "--webhook-secret",
        metavar="NAMESPACE/NAME",
        help="Secret the replicas share the webhook CA and certificate in (with --webhook-port)",
    )
    run.add_argument(
        "--webhook-certificates",
        choices=("self-signed", "issued"),
        default="self-signed",
        help="self-signed: the replicas keep their own CA in --webhook-secret and patch caBundle; "
        "issued: an outside issuer (cert-manager) keeps --webhook-secret and fills caBundle",
    )
    run.add_argument(
        "--hints-configmap",
        metavar="NAMESPACE/NAME",
        help="ConfigMap for migrate-mode placement hints (with --webhook-port)",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="act only while holding the --lease; standbys wait to take over",
    )
    run.add_argument("--lease", metavar="NAMESPACE/NAME", default="kube-system/topology-rebalancer")
    run.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="this replica's name in the lease (default: $POD_NAME, else the hostname)",
    )
    run.add_argument(
        "--unready-after",
        type=int,
        default=3,
        metavar="N",
        help="report unready on /readyz once N cycles in a row have ended in error (default 3)",
    )
    run.add_argument(
        "--once",
        action="store_true",
        help="run one cycle and exit: 0 if it could act, 3 if it was skipped",
    )

    simulate = commands.add_parser(
        "simulate", help="run the planner cycle after cycle on a simulated cluster"
    )
    simulate.add_argument("scenario", type=Path, nargs="?", help="scenario YAML")
    simulate.add_argument("--schema", action="store_true", help="print the scenario JSON Schema")
    simulate.add_argument("--policy", type=Path, help="policy YAML (default: zone/rack/host)")
    simulate.add_argument("--cycles", type=int, default=10)
    simulate.add_argument("--mode", choices=("evict", "migrate"), default="migrate")
    simulate.add_argument("--seed", type=int, default=0, help="the simulated scheduler's ties")
    simulate.add_argument("--output", choices=("table", "json"), default="table")
    simulate.add_argument("--plot", type=Path, metavar="FILE.png")
    simulate.add_argument(
        "--optimum", action="store_true", help="also solve for the best placement (HiGHS MIP)"
    )

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


@collector_paused()
def _plan(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else Policy()
    if args.traffic is not None and args.prometheus:
        raise InputError("plan: give either --traffic FILE or --prometheus URL, not both")
    if args.snapshot is not None and args.kubeconfig:
        raise InputError("plan: give either --snapshot FILE or --kubeconfig PATH, not both")
    reader: AnswerReader
    if args.traffic is not None:
        reader = RecordedAnswer.from_file(args.traffic)
    elif args.prometheus:
        reader = PrometheusReader(args.prometheus, policy.traffic.timeout_seconds)
    else:
        raise InputError("plan: give --traffic FILE or --prometheus URL")
    source = TrafficInput(policy.traffic, reader)
    answers = source.answers()
    if args.snapshot is not None:
        snapshot = load_snapshot(args.snapshot)
    else:
        snapshot = read_snapshot(api_client(args.kubeconfig))
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
            args.state.write_text(outcome.state.model_dump_json(indent=2), encoding="utf-8")
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
        print(outcome_table(outcome, unit, currency))
    if outcome.failure is not None:
        print(
            f"rebalancer: no moves: traffic {outcome.failure.reason}: {outcome.failure.detail}",
            file=sys.stderr,
        )


def _simulate(args: argparse.Namespace) -> int:
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
        scenario, policy, cycles=args.cycles, mode=args.mode, seed=args.seed, optimum=args.optimum
    )
    if args.output == "json":
        print(json.dumps(result_json(result), indent=2))
    else:
        print(result_table(result))
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


def _snapshot(args: argparse.Namespace) -> int:
    document = list_cluster(api_client(args.kubeconfig))
    try:
        args.output.write_text(json.dumps(document, indent=1), encoding="utf-8")
    except OSError as error:
        raise InputError(f"{args.output}: cannot write snapshot ({error.strerror})") from None
    print(f"wrote {len(document['items'])} objects to {args.output}")
    return EXIT_OK


def _start_webhook(api: ApiClient, args: argparse.Namespace) -> WebhookServer:
    for flag in ("hints_configmap", "webhook_secret"):
        if not getattr(args, flag):
            option = "--" + flag.replace("_", "-")
            raise InputError(f"run: --webhook-port needs {option} NAMESPACE/NAME")
    # Its own client, retrying nothing: a review is answered within the API server's timeout.
    unretried = api_client(args.kubeconfig, retry_reads=False)
    hints = HintStore(unretried, *parse_reference(args.hints_configmap, "--hints-configmap"))
    secret = parse_reference(args.webhook_secret, "--webhook-secret")

    issued = args.webhook_certificates == "issued"

    def current_keys() -> ServingKeys:
        if issued:
            return issued_serving_keys(api, secret)
        return shared_serving_keys(
            api, secret, dns_names=args.webhook_names.split(","), ip_addresses=["127.0.0.1"]
        )

    webhook = WebhookServer(hints, current_keys(), port=args.webhook_port).start()
    if not issued:
        try:
            webhook.publish_ca(api, args.webhook_config)
        except SourceUnavailableError:
            webhook.stop()
            raise
    webhook.keep_fresh(
        current_keys,
        every_seconds=KEY_REFRESH_SECONDS,
        publish_to=None if issued else (api, args.webhook_config),
    )
    return webhook


def _run(args: argparse.Namespace) -> int:
    if args.unready_after < 1:
        raise InputError(f"run: --unready-after must be at least 1, got {args.unready_after}")
    configure_logging()
    api = api_client(args.kubeconfig)
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
    policies: PolicySource
    if args.policy is not None:
        policies = FixedPolicy(load_policy(args.policy))
    else:
        namespace, name = parse_reference(args.policy_configmap, "--policy-configmap")
        policies = ConfigMapPolicy(api, namespace, name, recorder)
    state_namespace, state_name = parse_reference(args.state_configmap, "--state-configmap")
    registry = CollectorRegistry()
    hints = None
    webhook = None
    if args.webhook_port is not None:
        webhook = _start_webhook(api, args)
        hints = webhook.hints
    # One cycle lists once; a watch cache would keep retrying an API server that is not there.
    cache = None if args.once else WatchCache(api).start()
    if cache is not None and not cache.wait_synced(timeout=120):
        logging.getLogger(__name__).warning("watch cache not synced yet; cycles wait for it")
    controller = Controller(
        api=api,
        snapshots=(lambda: read_snapshot(api)) if cache is None else cache.snapshot,
        prometheus_url=args.prometheus,
        policies=policies,
        state=ConfigMapState(api, state_namespace, state_name),
        metrics=ControllerMetrics(registry),
        recorder=recorder,
        hints=hints,
        unready_after=args.unready_after,
    )
    server = serve_metrics(registry, args.metrics_port, controller.ready, args.metrics_address)
    logging.getLogger(__name__).info("serving metrics on port %d", server.server_port)
    try:
        if args.once:
            report = controller.run_cycle()
            if report.result == "ok":
                return EXIT_OK
            print(f"rebalancer: cycle {report.result}: {report.detail}", file=sys.stderr)
            return SourceUnavailableError.exit_code
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        if not args.leader_elect:
            controller.run_until(stop)
            return EXIT_OK
        return run_as_candidate(
            api,
            lease=parse_reference(args.lease, "--lease"),
            identity=args.identity,
            lead=controller.run_until,
            stop=stop,
        )
    finally:
        if cache is not None:
            cache.stop()
        server.shutdown()
        if webhook is not None:
            webhook.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"plan": _plan, "run": _run, "simulate": _simulate, "snapshot": _snapshot}
    try:
        return commands[args.command](args)
    except (InputError, SourceUnavailableError) as error:
        print(f"rebalancer: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
