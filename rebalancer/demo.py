"""`make demo`: the rebalancer live, on the local control plane, in about two minutes.

The cluster is 3 zones x 2 racks x 2 kwok nodes, with the real API server, scheduler and
controllers. It runs a shop frontend in zone a that talks hard to its cart in zone b, a training
gang, a ledger spread over the zones on purpose, and a quiet agent. The controller runs one
dry-run cycle, then migrate cycles. After each cycle it prints the true traffic crossing zones and
racks (from the exporter, not from the rebalancer's own model), the moves, and where the
replacements landed. It ends with a before/after summary and a plot. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from rebalancer.controller import Controller, CycleReport
from rebalancer.executor import EventRecorder
from rebalancer.hints import HintStore
from rebalancer.kube import read_snapshot
from rebalancer.landing import judge
from rebalancer.metrics import ControllerMetrics
from rebalancer.policy import parse_policy
from rebalancer.scenario import load_scenario
from rebalancer.sources import ConfigMapState, FixedPolicy
from rebalancer.testing.cluster import LocalCluster, local_cluster
from rebalancer.testing.exporter import ClusterTraffic
from rebalancer.testing.live import live_scenario
from rebalancer.testing.process import free_port
from rebalancer.webhook import WebhookServer, webhook_configuration

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WINDOW_SECONDS = 10


@dataclass
class Row:
    cycle: int
    mode: str
    zone: float
    rack: float
    moves: int
    landed: int
    elsewhere: int


@dataclass
class _Run:
    cluster: LocalCluster
    truth: ClusterTraffic
    controller: Controller
    rows: list[Row] = field(default_factory=list)

    def cycle(self, number: int, mode: str) -> CycleReport:
        policies = self.controller.policies
        assert isinstance(policies, FixedPolicy)
        policies.policy = policies.policy.model_copy(update={"mode": mode})
        report = self.controller.run_cycle()
        moved = [o.move for o in report.outcomes if o.result in {"evicted", "would-evict"}]
        landed = elsewhere = 0
        if mode != "dry-run" and moved:
            self._settle(report)
            # The controller judges these at its next cycle; the demo looks now, read-only.
            snapshot = read_snapshot(self.cluster.api_client())
            judged, _pending = judge(self.controller.state.load().landings, snapshot, time.time())
            landed = sum(item.result == "landed-in-target" for item in judged)
            elsewhere = len(judged) - landed
        crossing = self.truth.true_crossing()
        row = Row(number, mode, crossing["zone"], crossing["rack"], len(moved), landed, elsewhere)
        self.rows.append(row)
        print(
            f"{row.cycle:>5}  {row.mode:<8} {row.zone:>10.1f} {row.rack:>10.1f} {row.moves:>6}"
            f"  {row.landed:>6} {row.elsewhere:>9}   {report.result}"
        )
        for move in moved:
            print(f"{'':7}{move.pod} -> {move.destination} ({move.strategy})")
        return report

    def _settle(self, report: CycleReport) -> None:
        """Wait for the replacements and for Prometheus to see a full window of their traffic."""
        apps = {o.move.pod.split("/")[0] for o in report.outcomes}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snapshot = read_snapshot(self.cluster.api_client())
            pending = [
                p
                for p in snapshot.pods.values()
                if p.namespace in apps and not (p.node_name and p.ready)
            ]
            if not pending:
                break
            time.sleep(0.5)
        time.sleep(WINDOW_SECONDS + 1)


def _plot(rows: list[Row], path: Path) -> None:
    import matplotlib  # noqa: PLC0415 - only the demo draws, so only the demo pays the import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(7, 4))
    cycles = [row.cycle for row in rows]
    axes.plot(cycles, [row.zone for row in rows], marker="o", label="crossing zones")
    axes.plot(cycles, [row.rack for row in rows], marker="s", label="crossing racks")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("cycle (0: dry-run)")
    axes.set_ylabel("flows/s (ground truth)")
    axes.set_title("topology-rebalancer demo: traffic crossing the network")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(workdir: Path, cycles: int) -> list[Row]:
    """Run the demo; returns one row of figures per cycle, the first the dry run."""
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh cluster each time, as on a new machine
    workdir.mkdir(parents=True)
    scenario = load_scenario(EXAMPLES / "scenarios" / "demo.yaml")
    namespaces = sorted({w.namespace for w in scenario.workloads})
    print("starting the local control plane (the first run builds it, which takes minutes)")
    with local_cluster(workdir / "cluster") as cluster:
        api = cluster.api_client()
        for namespace in namespaces:
            cluster.ensure_namespace(namespace)
        hints = HintStore(api, namespaces[0], "rebalancer-hints")
        webhook = WebhookServer(
            hints,
            port=free_port(),
            dns_names=["localhost"],
            ip_addresses=["127.0.0.1"],
            address="127.0.0.1",
        ).start()
        try:
            url = f"https://127.0.0.1:{webhook.port}/mutate"
            cluster.apply([webhook_configuration("topology-rebalancer", url, namespaces)])
            webhook.publish_ca(api, "topology-rebalancer")
            print("loading the demo scenario and waiting for Prometheus to see its traffic")
            with live_scenario(cluster, scenario, workdir / "prometheus") as (truth, prometheus):
                policy_text = (EXAMPLES / "demo" / "live-policy.yaml").read_text()
                controller = Controller(
                    api=api,
                    snapshots=lambda: read_snapshot(api),
                    prometheus_url=prometheus.url,
                    policies=FixedPolicy(parse_policy(policy_text, "live-policy.yaml")),
                    state=ConfigMapState(api, namespaces[0], "rebalancer-state"),
                    metrics=ControllerMetrics(CollectorRegistry()),
                    recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
                    hints=hints,
                )
                demo = _Run(cluster, truth, controller)
                print(f"\nPrometheus: {prometheus.url}   kubeconfig: {cluster.kubeconfig}\n")
                print("cycle  mode      zone-flows rack-flows  moves  landed elsewhere   result")
                demo.cycle(0, "dry-run")
                for number in range(1, cycles + 1):
                    if not demo.cycle(number, "migrate").outcomes:
                        break
                _summary(demo.rows, workdir / "demo.png")
                return demo.rows
        finally:
            webhook.stop()


def _summary(rows: list[Row], plot: Path) -> None:
    first, last = rows[0], rows[-1]
    moves = sum(row.moves for row in rows if row.mode != "dry-run")
    landed = sum(row.landed for row in rows)
    print("\n              before      after")
    print(f"zone flows/s  {first.zone:>8.1f} {last.zone:>10.1f}")
    print(f"rack flows/s  {first.rack:>8.1f} {last.rack:>10.1f}")
    print(f"moves: {moves}, landed in the planned zone: {landed}")
    _plot(rows, plot)
    print(f"plot: {plot.resolve()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(".demo"))
    parser.add_argument("--cycles", type=int, default=6, help="migrate cycles at most")
    args = parser.parse_args()
    try:
        run(args.workdir, args.cycles)
    except KeyboardInterrupt:
        print("\nstopped; every process of the demo has been ended")


if __name__ == "__main__":
    main()
