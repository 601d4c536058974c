"""A real Kubernetes control plane on loopback, with kwok playing the nodes and their kubelets.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the real binaries, built from
Go modules by `tools/build-test-binaries.sh`, because the rebalancer's promises are about their
behaviour: the API server judges PodDisruptionBudgets on evictions, controllers recreate evicted
pods, and the stock scheduler re-places them. kind would give the same, but needs a Docker engine.

Every process runs in its own session and is stopped (then killed) on `stop()`, which the context
manager and the pytest fixture always call, so no process outlives a failing test.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml
from kubernetes import client, config, utils

from harness.certificates import Pki, make_pki
from harness.paths import REPO
from harness.process import Component, free_port, spawn, stopped_by_signals, wait_until
from harness.prometheus import PrometheusServer
from rebalancer.clients.kube_api import list_raw
from rebalancer.errors import InputError
from rebalancer.simulator.objects import node_object, service_objects, workload_objects
from rebalancer.simulator.scenario import (
    LevelName,
    Scenario,
    WorkloadSpec,
    in_domain,
    load_scenario,
)

BUILD_SCRIPT = REPO / "tools" / "build-test-binaries.sh"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# node-lifecycle-controller lifts the not-ready taint that admission puts on every new Node, once
# kwok reports it Ready and renews its Lease, as it does for real kubelets. endpointslice-controller
# writes the Services' endpoints and the hints their trafficDistribution asks for.
CONTROLLERS = (
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "job-controller",
    "daemonset-controller",
    "disruption-controller",
    "endpointslice-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
)


def build_binaries() -> Path:
    """Build whatever is missing (progress on stderr) and return the binaries' directory."""
    override = os.environ.get("TOPOLOGY_REBALANCER_BIN")
    if override:
        return Path(override)
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True
    )
    return Path(result.stdout.strip().splitlines()[-1])


@dataclass
class LocalCluster:
    """etcd, the API server, controller-manager, scheduler and kwok, on free loopback ports."""

    workdir: Path
    bin_dir: Path
    components: dict[str, Component] = field(default_factory=dict)
    pki: Pki | None = None
    etcd_url: str = ""
    api_port: int = 0
    _api: client.ApiClient | None = None
    _ready_checks: dict[str, Callable[[], bool]] = field(default_factory=dict)
    """How each component was judged ready at start, to judge it again after a restart."""

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        try:
            self.pki = make_pki(self.workdir / "pki")
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig()
            self._start_controllers()
        except BaseException:
            self.stop()
            raise

    def _run(self, name: str, args: list[str]) -> Component:
        return self.spawn(name, [str(self.bin_dir / args[0]), *args[1:]])

    def spawn(self, name: str, argv: list[str]) -> Component:
        """Start a process in its own session, logging to logs/NAME.log; stop() ends it."""
        component = spawn(name, argv, self.workdir / "logs" / f"{name}.log")
        self.components[name] = component
        (self.workdir / "pids.json").write_text(
            json.dumps({n: c.process.pid for n, c in self.components.items()})
        )
        return component

    def _wait(self, name: str, check: Callable[[], bool], timeout: float = 60) -> None:
        self._ready_checks[name] = check
        component = self.components[name]

        def ready() -> bool:
            if not component.alive():
                code = component.process.returncode
                raise RuntimeError(f"{name} exited with {code}:\n{component.log_tail()}")
            return check()

        wait_until(ready, timeout, name)

    def _start_etcd(self) -> None:
        client_url = f"http://127.0.0.1:{free_port()}"
        peer_url = f"http://127.0.0.1:{free_port()}"
        self.etcd_url = client_url
        self._run(
            "etcd",
            [
                "etcd",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait(
            "etcd",
            lambda: requests.get(f"{client_url}/health", timeout=1).json()["health"] == "true",
        )

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        pki = self.pki
        self.api_port = free_port()
        self._run(
            "kube-apiserver",
            [
                "kube-apiserver",
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki.server_cert}",
                f"--tls-private-key-file={pki.server_key}",
                f"--client-ca-file={pki.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account_public_key}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                # The upstream PodGroup API (alpha in 1.36), whose gangs the rebalancer leaves
                # to their scheduler: pods name theirs in spec.schedulingGroup.
                "--feature-gates=GenericWorkload=true",
                "--runtime-config=scheduling.k8s.io/v1alpha2=true",
            ],
        )
        session = self._admin_session()
        self._wait(
            "kube-apiserver",
            lambda: session.get(f"{self.server}/readyz", timeout=2).text == "ok",
            timeout=90,
        )

    def _admin_session(self) -> requests.Session:
        assert self.pki is not None
        session = requests.Session()
        session.trust_env = False  # else REQUESTS_CA_BUNDLE silently replaces our CA
        session.cert = (str(self.pki.admin_cert), str(self.pki.admin_key))
        session.verify = str(self.pki.ca_cert)
        return session

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None
        user = {
            "client-certificate-data": _encoded(self.pki.admin_cert),
            "client-key-data": _encoded(self.pki.admin_key),
        }
        self._write_kubeconfig_for(user, self.kubeconfig)

    def _write_kubeconfig_for(self, user: dict[str, str], path: Path) -> None:
        assert self.pki is not None
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _encoded(self.pki.ca_cert),
                    },
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount, with a bound token from the
        TokenRequest API, as a pod running under that account would."""
        core = client.CoreV1Api(self.api_client())
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        )
        answer: Any = core.create_namespaced_service_account_token(name, namespace, request)
        self._write_kubeconfig_for({"token": answer.status.token}, path)
        return path

    def _start_controllers(self) -> None:
        assert self.pki is not None
        manager_port, scheduler_port = free_port(), free_port()
        self._run(
            "kube-controller-manager",
            [
                "kube-controller-manager",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={manager_port}",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--root-ca-file={self.pki.ca_cert}",
                f"--service-account-private-key-file={self.pki.service_account_key}",
            ],
        )
        self._run(
            "kube-scheduler",
            [
                "kube-scheduler",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={scheduler_port}",
            ],
        )
        self._run(
            "kwok",
            [
                "kwok",
                f"--kubeconfig={self.kubeconfig}",
                f"--config={self.bin_dir / 'stages.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.0.0.1",
                "--server-address=",
                "--node-lease-duration-seconds=40",
            ],
        )
        self._wait("kube-controller-manager", partial(_healthy, manager_port))
        self._wait("kube-scheduler", partial(_healthy, scheduler_port))
        core = client.CoreV1Api(self.api_client())
        self._wait(
            "kube-controller-manager",
            lambda: bool(core.read_namespaced_service_account("default", "default")),
        )

    def stop_component(self, name: str) -> None:
        """Stop one component, as a crash or an outage would; `start_component` brings it back."""
        self.components[name].stop()

    def start_component(self, name: str, timeout: float = 90) -> None:
        """Start a stopped component again, with the same flags and ports, and wait until it
        passes the readiness check it passed at first start; nothing to do while it runs."""
        stopped = self.components[name]
        if stopped.alive():
            return
        self.spawn(name, [str(arg) for arg in stopped.process.args])  # type: ignore[union-attr]
        check = self._ready_checks.get(name)
        if check is not None:
            self._wait(name, check, timeout)

    def api_client(self) -> client.ApiClient:
        """One admin client per cluster, so polling loops reuse its connection pool."""
        if self._api is None:
            self._api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(self.kubeconfig)
            )
        return self._api

    def stop(self) -> None:
        # Reverse order: clients of the API server first, etcd last.
        for name in reversed(list(self.components)):
            self.components[name].stop()
        self.components.clear()
        if self._api is not None:
            self._api.close()  # type: ignore[no-untyped-call]
            self._api = None

    def add_nodes(self, nodes: list[dict[str, Any]], timeout: float = 60) -> None:
        """Create kwok-managed Nodes (label sets and allocatable) and wait until they are Ready."""
        core = client.CoreV1Api(self.api_client())
        for node in nodes:
            body = json.loads(json.dumps(node))
            body.setdefault("metadata", {}).setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
            body["metadata"].setdefault("labels", {})["type"] = "kwok"
            body.get("status", {}).pop("conditions", None)  # kwok reports these, like a kubelet
            body["status"]["capacity"] = body["status"].get("allocatable", {})
            try:
                core.create_node(body)
            except client.ApiException as error:
                if error.status != 409:  # a node of that name exists already: keep it
                    raise
        names = {node["metadata"]["name"] for node in nodes}

        def all_ready() -> bool:
            ready = {
                node["metadata"]["name"]
                for node in list_raw("Node", core.list_node)
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node.get("status", {}).get("conditions") or ()
                )
            }
            return names <= ready

        wait_until(all_ready, timeout, f"{len(names)} kwok nodes")

    def apply(self, objects: list[dict[str, Any]]) -> None:
        api = self.api_client()
        for body in objects:
            namespace = body["metadata"].get("namespace", "default")
            utils.create_from_dict(api, body, namespace=namespace)  # type: ignore[no-untyped-call]

    def ensure_namespace(self, name: str, timeout: float = 30) -> None:
        """Create the namespace if needed and wait for its default ServiceAccount, without which
        the ServiceAccount admission plugin refuses pods."""
        core = client.CoreV1Api(self.api_client())
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        except client.ApiException as error:
            if error.status != 409:
                raise
        wait_until(
            lambda: bool(core.read_namespaced_service_account("default", name)),
            timeout,
            f"default ServiceAccount of {name}",
        )

    def ready_pods(self, namespace: str, app: str) -> list[dict[str, Any]]:
        """Pods of `app` that are bound, Running, Ready and not terminating, as raw JSON."""
        core = client.CoreV1Api(self.api_client())
        pods = list_raw(
            "Pod",
            lambda **kw: core.list_namespaced_pod(namespace, label_selector=f"app={app}", **kw),
        )
        return [pod for pod in pods if is_ready(pod)]

    def load_scenario(self, scenario: Scenario, timeout: float = 120) -> None:
        """Nodes, namespaces, Services, workloads and PDBs of the scenario, then wait for every
        replica. The local cluster has no storage provisioner, so a pod's claim would never bind,
        nor a process that makes owned pods (a Spark driver): such scenarios are refused."""
        claiming = [w.key for w in scenario.workloads if w.persistent]
        if claiming:
            raise ValueError(
                f"{scenario.name}: {claiming[0]} claims a persistent volume, which the local "
                "cluster cannot provision; simulate it instead"
            )
        owned = [w.key for w in scenario.workloads if w.owner is not None]
        if owned:
            raise ValueError(
                f"{scenario.name}: {owned[0]}'s pods are made by their owner pod, which no "
                "process plays on the local cluster; simulate it instead"
            )
        self.add_nodes([node_object(spec) for spec in scenario.node_specs()])
        for namespace in sorted({w.namespace for w in scenario.workloads}):
            self.ensure_namespace(namespace)
        self.apply(service_objects(scenario))
        for workload in scenario.workloads:
            if workload.start_in:
                # Cordon everything outside the start domain until the pods are placed, the way
                # an earlier history of the cluster would have put them there.
                with self.only_schedulable(workload.start_in):
                    self.apply(workload_objects(workload))
                    self.wait_ready(workload.namespace, workload.name, workload.replicas, timeout)
            else:
                self.apply(workload_objects(workload))
        for workload in scenario.workloads:
            self.wait_ready(workload.namespace, workload.name, self._pods_of(workload), timeout)

    def _pods_of(self, workload: WorkloadSpec) -> int:
        """Its replicas, or for a DaemonSet the nodes of this cluster its selector allows (other
        modules may have added nodes beside the scenario's)."""
        if workload.kind != "DaemonSet":
            return workload.replicas
        core = client.CoreV1Api(self.api_client())
        wanted = workload.node_selector.items()
        return sum(
            wanted <= (node["metadata"].get("labels") or {}).items()
            for node in list_raw("Node", core.list_node)
        )

    def only_schedulable(
        self, domain: Mapping[LevelName, str]
    ) -> contextlib.AbstractContextManager[None]:
        """Cordon every node outside `domain` ({level: value}) for the duration of the block."""
        return self.cordoned_unless(
            lambda node: in_domain(node["metadata"].get("labels") or {}, domain)
        )

    @contextlib.contextmanager
    def cordoned_unless(self, keep: Callable[[dict[str, Any]], bool]) -> Iterator[None]:
        """Cordon every schedulable node `keep` refuses (given its raw JSON) for the block."""
        core = client.CoreV1Api(self.api_client())
        cordoned = [
            node["metadata"]["name"]
            for node in list_raw("Node", core.list_node)
            if not node.get("spec", {}).get("unschedulable") and not keep(node)
        ]
        for name in cordoned:
            core.patch_node(name, {"spec": {"unschedulable": True}})
        try:
            yield
        finally:
            for name in cordoned:
                core.patch_node(name, {"spec": {"unschedulable": False}})

    def wait_pdb(self, namespace: str, name: str, allowed: int, timeout: float = 60) -> None:
        """Until the disruption controller has caught up and the PDB allows `allowed`
        disruptions; before that the API server answers every eviction with 429."""
        policy = client.PolicyV1Api(self.api_client())

        def caught_up() -> bool:
            raw: Any = policy.read_namespaced_pod_disruption_budget(
                name, namespace, _preload_content=False
            )
            pdb = json.loads(raw.data)
            status = pdb.get("status") or {}
            return bool(
                status.get("observedGeneration") == pdb["metadata"]["generation"]
                and status.get("disruptionsAllowed") == allowed
            )

        wait_until(caught_up, timeout, f"PDB {namespace}/{name} allowing {allowed}")

    def wait_ready(self, namespace: str, app: str, count: int, timeout: float = 60) -> None:
        wait_until(
            lambda: len(self.ready_pods(namespace, app)) == count,
            timeout,
            f"{count} ready pods of {namespace}/{app}",
        )


def _encoded(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _healthy(port: int) -> bool:
    """A component's own /healthz, served with its self-signed certificate (the warning about
    that is silenced here, not globally: pytest resets the filters local_cluster sets)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        answer = requests.get(f"https://127.0.0.1:{port}/healthz", timeout=2, verify=False)
    return answer.text == "ok"


def is_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return (
        bool(pod.get("spec", {}).get("nodeName"))
        and status.get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
    )


@contextmanager
def local_cluster(workdir: Path) -> Iterator[LocalCluster]:
    """Start the control plane, yield it, and always stop every process."""
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    with stopped_by_signals():
        cluster = LocalCluster(workdir=workdir, bin_dir=build_binaries())
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


def _up(workdir: Path, scenario_path: Path) -> None:
    """Start everything detached, for hands-on use; `down` stops it from pids.json. Each start
    is fresh: etcd's data from the last run held the scenario's objects, and loading them again
    failed with 409 Conflict."""
    workdir = workdir.resolve()
    running = [name for name, pid in _recorded_pids(workdir).items() if _alive(pid)]
    if running:
        raise InputError(
            f"a local cluster is still running in {workdir} ({', '.join(running)}): "
            "stop it first (make cluster-down)"
        )
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    scenario = load_scenario(scenario_path)
    for state in ("etcd", "tsdb", "pki"):  # only what a run writes: the folder may be the user's
        shutil.rmtree(workdir / state, ignore_errors=True)
    with stopped_by_signals():
        cluster = LocalCluster(workdir=workdir, bin_dir=build_binaries())
        cluster.start()
        try:
            cluster.load_scenario(scenario)
            port = free_port()
            argv = [
                sys.executable,
                "-m",
                "harness.exporter",
                f"--kubeconfig={cluster.kubeconfig}",
                f"--port={port}",
                f"--scenario={scenario_path}",
            ]
            cluster.spawn("exporter", argv)
            prometheus = PrometheusServer(workdir, [f"127.0.0.1:{port}"])
            cluster.components["prometheus"] = prometheus.component
            prometheus.wait_ready()
        except BaseException:
            cluster.stop()
            (workdir / "pids.json").unlink(missing_ok=True)
            raise
    (workdir / "pids.json").write_text(
        json.dumps({n: c.process.pid for n, c in cluster.components.items()})
    )
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"prometheus: {prometheus.url}")
    print(f"logs:       {workdir / 'logs'}")


def _recorded_pids(workdir: Path) -> dict[str, int]:
    try:
        pids: dict[str, int] = json.loads((workdir / "pids.json").read_text())
    except (OSError, ValueError):
        return {}
    return pids


def _down(workdir: Path) -> None:
    pids = _recorded_pids(workdir)
    if not pids:
        print("no local cluster is running")
        return
    for name, pid in reversed(list(pids.items())):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        print(f"stopped {name}")
    (workdir / "pids.json").unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description="a local control plane with kwok nodes")
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--scenario", type=Path, help="nodes, workloads and traffic (for up)")
    args = parser.parse_args()
    try:
        if args.action == "up":
            if args.scenario is None:
                raise InputError("up needs --scenario FILE")
            _up(args.workdir, args.scenario)
        else:
            _down(args.workdir)
    except KeyboardInterrupt:
        print("cluster: stopped; every process it had started has been ended", file=sys.stderr)
        sys.exit(130)
    except (
        InputError,
        RuntimeError,
        TimeoutError,
        subprocess.CalledProcessError,
    ) as error:
        print(f"cluster: {error}", file=sys.stderr)
        sys.exit(1)
    except client.ApiException as error:
        print(f"cluster: the API server answered {error.status} {error.reason}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
