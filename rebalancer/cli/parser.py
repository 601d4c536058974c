"""The command line: every command, flag and help text, and the flags read into settings."""

from __future__ import annotations

import argparse
import os
import re
import socket
from pathlib import Path
from typing import Any

from rebalancer.clients.prometheus import PrometheusAccess
from rebalancer.controller.logs import LEVELS
from rebalancer.errors import InputError
from rebalancer.identity import running_version

DESCRIPTION = """\
Moves pods that exchange heavy traffic but sit in different zones or racks closer together,
within PodDisruptionBudgets. Traffic comes from Prometheus, the topology from node labels.

Start with `rebalancer plan` to see what it would move, `rebalancer simulate` to try a policy on
a simulated cluster, then `rebalancer run` (dry-run by default) in the cluster.

Exit codes: 0 done; 2 bad input (one line naming the field or file); 3 a source (Prometheus, the
Kubernetes API) could not answer, so nothing was planned.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalancer",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {running_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_plan(commands)
    _add_run(commands)
    _add_simulate(commands)
    _add_policy(commands)
    _add_topology(commands)
    _add_snapshot(commands)
    return parser


def _add_plan(commands: Any) -> None:
    plan = commands.add_parser("plan", help="compute one plan and print it; evicts nothing")
    plan.add_argument("--policy", type=Path, help="policy YAML (default: built-in defaults)")
    plan.add_argument("--snapshot", type=Path, help="cluster state, as kubectl get -o json prints")
    plan.add_argument("--traffic", type=Path, help="a saved Prometheus /api/v1/query response")
    plan.add_argument("--kubeconfig", help="read the cluster live (the default without --snapshot)")
    plan.add_argument("--prometheus", help="Prometheus base URL, to read traffic live")
    _add_prometheus_access(plan)
    plan.add_argument(
        "--state",
        type=Path,
        help="planner state JSON to read and update; "
        "without it the persistence gate is not applied",
    )
    plan.add_argument(
        "--output", choices=("table", "json"), default="table", help="table (default) or JSON"
    )


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="the controller: plan and act every interval")
    run.add_argument("--kubeconfig", help="kubeconfig path (in-cluster config if omitted)")
    run.add_argument(
        "--prometheus",
        required=True,
        help="Prometheus base URL, a path prefix included (example: https://mimir/prometheus)",
    )
    _add_prometheus_access(run)
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
    run.add_argument(
        "--metrics-address", default="0.0.0.0", help="address to serve metrics on (default: all)"
    )
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
    run.add_argument(
        "--lease",
        metavar="NAMESPACE/NAME",
        default="kube-system/topology-rebalancer",
        help="the coordination.k8s.io Lease for --leader-elect (example: ops/topology-rebalancer)",
    )
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
        "--log-level",
        choices=LEVELS,
        default="info",
        help="the least severe log lines written (default info)",
    )
    run.add_argument(
        "--once",
        action="store_true",
        help="run one cycle and exit: 0 if it could act, 3 if it was skipped",
    )


def _add_simulate(commands: Any) -> None:
    simulate = commands.add_parser(
        "simulate", help="run the planner cycle after cycle on a simulated cluster"
    )
    simulate.add_argument("scenario", type=Path, nargs="?", help="scenario YAML")
    simulate.add_argument("--schema", action="store_true", help="print the scenario JSON Schema")
    simulate.add_argument("--policy", type=Path, help="policy YAML (default: zone/rack/host)")
    simulate.add_argument("--cycles", type=int, default=10, help="cycles to run (default 10)")
    simulate.add_argument(
        "--mode",
        choices=("evict", "migrate"),
        default="migrate",
        help="evict: the simulated scheduler places replacements; migrate (default): steered",
    )
    simulate.add_argument("--seed", type=int, default=0, help="the simulated scheduler's ties")
    simulate.add_argument(
        "--output", choices=("table", "json"), default="table", help="table (default) or JSON"
    )
    simulate.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="also plot the traffic crossing each level"
    )
    simulate.add_argument(
        "--optimum", action="store_true", help="also solve for the best placement (HiGHS MIP)"
    )
    simulate.add_argument(
        "--routing",
        choices=("keep", "apply"),
        default="keep",
        help="apply: make the trafficDistribution changes the plan recommends, as if each "
        "Service were patched; keep (default): leave every Service as the scenario sets it",
    )
    simulate.add_argument(
        "--no-moves",
        dest="moves",
        action="store_false",
        help="make no move (with --routing apply: what routing alone achieves)",
    )


def _add_policy(commands: Any) -> None:
    policy = commands.add_parser("policy", help="check a policy file, or print its JSON Schema")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    validate = policy_commands.add_parser(
        "validate", help="exit 0 if the file is a valid policy, else 2 with the first problems"
    )
    validate.add_argument("file", type=Path, help="policy YAML, as in the ConfigMap's policy.yaml")
    policy_commands.add_parser("schema", help="print the policy's JSON Schema")


def _add_topology(commands: Any) -> None:
    topology = commands.add_parser(
        "topology", help="the policy's topology levels on this cluster, and which are in force"
    )
    topology.add_argument("--policy", type=Path, help="policy YAML (default: built-in defaults)")
    topology.add_argument("--snapshot", type=Path, help="a cluster state file instead of live")
    topology.add_argument("--kubeconfig", help="read the cluster live (the default)")
    topology.add_argument(
        "--output", choices=("table", "json"), default="table", help="table (default) or JSON"
    )


def _add_snapshot(commands: Any) -> None:
    snapshot = commands.add_parser("snapshot", help="write the cluster state to a snapshot file")
    snapshot.add_argument("--kubeconfig", help="kubeconfig path (in-cluster config if omitted)")
    snapshot.add_argument(
        "--output", type=Path, required=True, help="the JSON file to write (example: cluster.json)"
    )


def _add_prometheus_access(command: argparse.ArgumentParser) -> None:
    """Flags for a secured Prometheus; secrets are files (a mounted Secret), read per query."""
    command.add_argument(
        "--prometheus-bearer-token-file", type=Path, help="send this file's token as Bearer"
    )
    command.add_argument("--prometheus-username", help="basic auth user (with a password file)")
    command.add_argument("--prometheus-password-file", type=Path, help="basic auth password")
    command.add_argument("--prometheus-ca-file", type=Path, help="CA bundle to trust (PEM)")
    command.add_argument("--prometheus-cert-file", type=Path, help="client certificate (PEM)")
    command.add_argument("--prometheus-key-file", type=Path, help="client certificate's key")
    command.add_argument(
        "--prometheus-header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="a header sent with every query; repeat for more (example: X-Scope-OrgID:team-a)",
    )


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def prometheus_access(args: argparse.Namespace) -> PrometheusAccess:
    """The access flags as settings, or InputError naming the flag that cannot work."""
    headers = {}
    for number, given in enumerate(args.prometheus_header, 1):
        # Never echoed: a header's value may be a secret (and one without a colon all of it).
        name, colon, value = given.partition(":")
        if not colon or not _HEADER_NAME.fullmatch(name.strip()):
            raise InputError(
                f"--prometheus-header (number {number}): expected NAME:VALUE, NAME a token"
            )
        if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in value):
            raise InputError(
                f"--prometheus-header {name.strip()}: its value holds a line break or another "
                "control character"
            )
        headers[name.strip()] = value.strip()
    access = PrometheusAccess(
        bearer_token_file=args.prometheus_bearer_token_file,
        username=args.prometheus_username,
        password_file=args.prometheus_password_file,
        ca_file=args.prometheus_ca_file,
        cert_file=args.prometheus_cert_file,
        key_file=args.prometheus_key_file,
        headers=headers,
    )
    problems = access.problems()
    if problems:
        raise InputError(problems[0])
    return access
