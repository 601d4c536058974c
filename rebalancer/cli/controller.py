"""`rebalancer run`: the controller wired to its clients, its webhook and its metrics server."""

from __future__ import annotations

import argparse
import datetime
import logging
import signal
import sys
import threading

from prometheus_client import CollectorRegistry

from rebalancer.cli.parser import prometheus_access
from rebalancer.clients.configmaps import parse_reference
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import ApiClient, api_client, read_snapshot
from rebalancer.clients.leadership import run_as_candidate
from rebalancer.clients.stores import ConfigMapPolicy, ConfigMapState, FixedPolicy
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.config.policy import Policy, load_policy
from rebalancer.controller.logs import configure as configure_logging
from rebalancer.controller.loop import Controller, PolicySource
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.controller.metrics import serve as serve_metrics
from rebalancer.errors import EXIT_OK, InputError, SourceUnavailableError, printable
from rebalancer.identity import running_version
from rebalancer.planning.surge import SCALED_DOWN_GRACE_SECONDS
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.serving_keys import issued_serving_keys, shared_serving_keys
from rebalancer.webhook.tls import ServingKeys

KEY_REFRESH_SECONDS = 3600
"""How often each replica rereads the shared webhook Secret: far inside the renewal margin."""


SURGE_POLL_SECONDS = 1.0


def settle_surges(controller: Controller, policy: Policy) -> None:
    """A single cycle finishes the surges it started, or undoes them at their timeout, before
    the process ends: no Deployment is left scaled up until some later run."""
    timeout = policy.migrate.surge.ready_timeout_seconds + SCALED_DOWN_GRACE_SECONDS
    try:
        controller.settle_surges(timeout + SURGE_POLL_SECONDS, SURGE_POLL_SECONDS)
    except SourceUnavailableError as error:  # the cycle's own error says it already
        logging.getLogger(__name__).warning("surges not settled: %s", error)


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


def run(args: argparse.Namespace) -> int:
    if args.unready_after < 1:
        raise InputError(f"run: --unready-after must be at least 1, got {args.unready_after}")
    access = prometheus_access(args)
    configure_logging(args.log_level)
    logging.getLogger(__name__).info(
        "topology-rebalancer %s starting as %s",
        running_version(),
        args.identity,
        extra={"fields": {"version": running_version(), "identity": args.identity}},
    )
    api = api_client(args.kubeconfig)
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC), args.identity)
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
        prometheus_access=access,
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
            if report.result != "error":  # an error said already that the cluster is out of reach
                settle_surges(controller, policies.current()[0])
            if report.result == "ok":
                return EXIT_OK
            print(printable(f"rebalancer: cycle {report.result}: {report.detail}"), file=sys.stderr)
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
