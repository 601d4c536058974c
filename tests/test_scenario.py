"""Scenarios validate with clear errors, become API objects, and drive the traffic model."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalancer.cluster.model import WorkloadRef
from rebalancer.errors import InputError
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.objects import node_object, workload_objects
from rebalancer.simulator.scenario import load_scenario, parse_scenario
from rebalancer.simulator.scheduler import Scheduler
from rebalancer.simulator.traffic_model import PlacedPod, pair_rates

EXAMPLES = Path(__file__).parent.parent / "examples" / "scenarios"
BASE = "name: t\nworkloads: [{name: a, replicas: 2}, {name: b, replicas: 2}]\n"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_scenario_loads(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.node_specs() and scenario.workloads


PHASED = (
    BASE + "phase_cycles: 4\ntraffic_phases: [[{source: a, destination: b, rate: 60}], "
    "[{source: a, destination: b, rate: 20}, {source: b, destination: a, rate: 40}]]"
)


def test_each_phase_is_in_force_for_its_cycles() -> None:
    scenario = parse_scenario(PHASED, "s")
    assert [scenario.phase_of(n) for n in range(10)] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert [f.rate for f in scenario.in_phase(5).traffic] == [20, 40]
    assert parse_scenario(BASE, "s").phase_of(7) == 0


def test_the_phases_averaged_are_each_flow_at_its_share_of_a_period() -> None:
    averaged = parse_scenario(PHASED, "s").averaged()
    assert averaged.traffic_phases == ()
    assert [(f.source, f.rate) for f in averaged.traffic] == [("a", 30), ("a", 10), ("b", 20)]
    steady = parse_scenario(BASE + "traffic: [{source: a, destination: b, rate: 5}]", "s")
    assert steady.averaged() is steady


def test_volumes_and_annotations_reach_the_manifests() -> None:
    scenario = parse_scenario(
        "name: t\nworkloads:\n"
        "  - {name: web, annotations: {a: b}, volumes: {tmp: memory, cache: emptyDir, "
        "logs: hostPath, data: persistent}}\n"
        "  - {name: db, kind: StatefulSet, volumes: {data: persistent}}\n"
        "  - {name: agent, kind: DaemonSet, node_selector: {pool: gpu}}\n",
        "s",
    )
    web, db, agent = (workload_objects(w)[0] for w in scenario.workloads)
    template = web["spec"]["template"]
    assert template["metadata"]["annotations"] == {"a": "b"}
    assert template["spec"]["volumes"] == [
        {"name": "tmp", "emptyDir": {"medium": "Memory"}},
        {"name": "cache", "emptyDir": {}},
        {"name": "logs", "hostPath": {"path": "/var/lib/web/logs"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
    ]
    assert "volumes" not in db["spec"]["template"]["spec"]  # the claim templates make them
    assert [t["metadata"]["name"] for t in db["spec"]["volumeClaimTemplates"]] == ["data"]
    assert agent["kind"] == "DaemonSet" and "replicas" not in agent["spec"]
    assert agent["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert [scenario.pods_of(w) for w in scenario.workloads] == [1, 1, 0]


def test_grid_nodes_carry_zone_rack_and_host_labels() -> None:
    scenario = parse_scenario(BASE + "nodes: {zones: 2, racks_per_zone: 1, nodes_per_rack: 2}", "s")
    nodes = [node_object(spec) for spec in scenario.node_specs()]
    assert [n["metadata"]["name"] for n in nodes] == [
        "node-a11",
        "node-a12",
        "node-b11",
        "node-b12",
    ]
    assert nodes[2]["metadata"]["labels"] == {
        "kubernetes.io/hostname": "node-b11",
        "topology.kubernetes.io/zone": "zone-b",
        "topology.kubernetes.io/rack": "rack-1",
    }


def test_workloads_become_api_objects_with_pdb_and_spread() -> None:
    scenario = parse_scenario(
        "name: t\nworkloads: [{name: db, kind: StatefulSet, replicas: 3, pdb: {max_unavailable: 1},"
        " spread: [{level: zone, hard: false}]}]",
        "s",
    )
    statefulset, pdb = workload_objects(scenario.workloads[0])
    assert statefulset["kind"] == "StatefulSet" and statefulset["spec"]["replicas"] == 3
    constraint = statefulset["spec"]["template"]["spec"]["topologySpreadConstraints"][0]
    assert constraint["topologyKey"] == "topology.kubernetes.io/zone"
    assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
    assert pdb["spec"] == {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: t\nworkloads: [{name: d, kind: Pod}, {name: e, owner: d, replicas: 2}]",
            "s: workloads.1.owner: only pods of kind Pod are owned by another pod",
        ),
        (
            "name: t\nworkloads: [{name: e, kind: Pod, owner: d, replicas: 2}]",
            "s: workloads.0.owner: 'd' must be a workload of kind Pod",
        ),
        (
            "name: t\nworkloads: [{name: d, kind: Pod, replicas: 2}, "
            "{name: e, kind: Pod, owner: d}]",
            "s: workloads.1.owner: 'd' must be a workload of kind Pod with one",
        ),
        (
            BASE + "traffic: [{source: a, destination: c, rate: 1}]",
            "s: traffic.0.destination: no workload 'c'",
        ),
        (
            BASE + "traffic_phases: [[{source: a, destination: b, rate: 1}], [{source: z, "
            "destination: b, rate: 1}]]",
            "s: traffic_phases.1.0.source: no workload 'z'",
        ),
        (
            "name: t\nworkloads: [{name: agent, kind: DaemonSet, replicas: 3}]",
            "s: workloads.0: replicas: a DaemonSet runs one pod on each node its "
            "node_selector allows, and its pods never move",
        ),
        (
            "name: t\nworkloads: [{name: a, volumes: {data: nfs}}]",
            "s: workloads.0.volumes.data: Input should be 'emptyDir', 'memory', 'hostPath' or "
            "'persistent'",
        ),
        (
            BASE + "phase_cycles: 0",
            "s: phase_cycles: Input should be greater than or equal to 1",
        ),
        (
            BASE + "traffic: [{source: a, destination: b, rate: 0}]",
            "s: traffic.0.rate: Input should be greater than 0",
        ),
        (
            BASE + "traffic: [{source: a, destination: b, rate: 1, routing: random}]",
            "s: traffic.0.routing: Input should be 'pinned', 'ring' or 'even'",
        ),
        (
            BASE + "traffic: [{source: a, destination: a, rate: 1, routing: pinned}]",
            "s: traffic.0: routing pinned pairs each pod with itself",
        ),
        (
            BASE + "traffic: [{source: a, destination: b, rate: 1, routing: ring}]",
            "s: traffic.0: routing ring is within one workload",
        ),
        (
            "name: t\nworkloads: [{name: a}, {name: a}]",
            "s: workloads: names must be unique, repeated: ['default/a']",
        ),
        (
            "name: t\nworkloads: [{name: a, pdb: {}}]",
            "s: workloads.0.pdb: give exactly one of min_available and max_unavailable",
        ),
        ("name: t\nworkloads: [{name: A_b}]", "s: workloads.0.name: String should match pattern"),
        (
            "name: t\nworkloads: [{name: a, replicaz: 2}]",
            "s: workloads.0.replicaz: Extra inputs are not permitted",
        ),
    ],
    ids=[
        "owned-not-a-pod",
        "owner-unknown",
        "owner-not-a-single-pod",
        "unknown-workload",
        "unknown-workload-in-a-phase",
        "daemonset-with-replicas",
        "unknown-volume-kind",
        "phases-of-no-cycles",
        "zero-rate",
        "bad-routing",
        "pinned-to-itself",
        "ring-across-workloads",
        "duplicate",
        "empty-pdb",
        "bad-name",
        "unknown-key",
    ],
)
def test_bad_scenarios_name_the_field(text: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_scenario(text, "s")
    assert str(raised.value).startswith(message)


def _pods(workload: str, zones: list[str]) -> list[PlacedPod]:
    return [
        PlacedPod(f"default/{workload}-{i}", f"default/{workload}", z) for i, z in enumerate(zones)
    ]


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        (
            "even",
            {("default/a-0", f"default/b-{j}"): 2.5 for j in range(2)}
            | {("default/a-1", f"default/b-{j}"): 2.5 for j in range(2)},
        ),
        ("pinned", {("default/a-0", "default/b-0"): 5.0, ("default/a-1", "default/b-1"): 5.0}),
    ],
)
def test_routing_models(routing: str, expected: dict[tuple[str, str], float]) -> None:
    scenario = parse_scenario(
        BASE + f"traffic: [{{source: a, destination: b, rate: 10, routing: {routing}}}]", "s"
    )
    pods = _pods("a", ["zone-a", "zone-c"]) + _pods("b", ["zone-b", "zone-a"])
    assert pair_rates(scenario, pods) == expected


def test_a_service_preferring_its_zone_keeps_calls_there_where_it_has_an_endpoint() -> None:
    """a-0 (zone a) reaches b-1, in its zone; a-1 (zone c, no endpoint) falls back to both, as
    kube-proxy does; a routing change made during the run overrides the scenario's."""
    text = BASE + "traffic: [{source: a, destination: b, rate: 10}]"
    routed = text.replace(
        "{name: b, replicas: 2}", "{name: b, replicas: 2, traffic_distribution: PreferClose}"
    )
    pods = _pods("a", ["zone-a", "zone-c"]) + _pods("b", ["zone-b", "zone-a"])
    expected = {
        ("default/a-0", "default/b-1"): 5.0,
        ("default/a-1", "default/b-0"): 2.5,
        ("default/a-1", "default/b-1"): 2.5,
    }
    assert pair_rates(parse_scenario(routed, "s"), pods) == expected
    changed = {"default/b": "PreferSameZone"}
    assert pair_rates(parse_scenario(text, "s"), pods, changed) == expected


def test_a_workload_talking_to_itself_skips_self_pairs() -> None:
    scenario = parse_scenario(BASE + "traffic: [{source: a, destination: a, rate: 6}]", "s")
    rates = pair_rates(scenario, _pods("a", ["z", "z", "z"]))
    assert len(rates) == 6 and ("default/a-0", "default/a-0") not in rates


def test_a_ring_sends_each_pod_to_the_next_and_the_last_to_the_first() -> None:
    scenario = parse_scenario(
        BASE + "traffic: [{source: a, destination: a, rate: 9, routing: ring}]", "s"
    )
    rates = pair_rates(scenario, _pods("a", ["z", "z", "z"]))
    assert rates == {
        ("default/a-0", "default/a-1"): 3.0,
        ("default/a-1", "default/a-2"): 3.0,
        ("default/a-2", "default/a-0"): 3.0,
    }


def test_gpus_node_selector_and_labels_reach_the_api_objects_and_the_snapshot() -> None:
    scenario = parse_scenario(
        "name: t\nnodes: {zones: 1, racks_per_zone: 1, nodes_per_rack: 1, extended: "
        "{nvidia.com/gpu: '8'}, labels: {pool: gpu}}\nworkloads: [{name: w, kind: Job, "
        "extended: {nvidia.com/gpu: '2'}, node_selector: {pool: gpu}, labels: {job-name: w}}]",
        "s",
    )
    [node] = [node_object(spec) for spec in scenario.node_specs()]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["pool"] == "gpu"
    [job] = workload_objects(scenario.workloads[0])
    pod_spec = job["spec"]["template"]["spec"]
    resources = pod_spec["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "2"
    assert pod_spec["nodeSelector"] == {"pool": "gpu"}
    assert job["spec"]["template"]["metadata"]["labels"] == {"job-name": "w", "app": "w"}


def test_a_replaced_ring_member_takes_the_rank_of_the_pod_it_replaced() -> None:
    """Training ranks are the Job's completion indexes, which a replacement inherits: a new name
    must not reorder the ring."""
    scenario = parse_scenario(
        "name: t\nworkloads: [{name: a, kind: Job, replicas: 3}]\n"
        "traffic: [{source: a, destination: a, rate: 9, routing: ring}]",
        "s",
    )
    pods = [
        PlacedPod("default/a-00007", "default/a", "z", rank=0),
        PlacedPod("default/a-00001", "default/a", "z", rank=1),
        PlacedPod("default/a-00002", "default/a", "z", rank=2),
    ]
    assert set(pair_rates(scenario, pods)) == {
        ("default/a-00007", "default/a-00001"),
        ("default/a-00001", "default/a-00002"),
        ("default/a-00002", "default/a-00007"),
    }
    [job] = workload_objects(scenario.workloads[0])
    assert job["spec"]["completionMode"] == "Indexed"


TENANT_SOURCES = ("sock-shop", "hotel-reservation", "social-network", "online-boutique")


def test_every_tenant_of_the_platform_scenario_is_its_sourced_application() -> None:
    """tenants-2000 says where its services come from by being copies of the sourced
    scenarios: copy k is the source's workloads and traffic with each namespace n renamed n-kk
    and every rate times the copy's load. Held here, an edit to either side shows."""
    platform = load_scenario(EXAMPLES / "tenants-2000.yaml")
    workloads = {w.key: w for w in platform.workloads}
    rates = {(f.source, f.destination, f.routing): f.rate for f in platform.traffic}
    copied: set[str] = set()
    for name in TENANT_SOURCES:
        source = load_scenario(EXAMPLES / f"{name}.yaml")
        for copy in range(1, 16):
            load = (1.0, 0.5, 0.25)[(copy - 1) % 3]

            def renamed(key: str, copy: int = copy) -> str:
                namespace, workload = key.split("/")
                return f"{namespace}-{copy:02d}/{workload}"

            for workload in source.workloads:
                namespace = f"{workload.namespace}-{copy:02d}"
                moved = workload.model_copy(update={"namespace": namespace})
                assert workloads[moved.key] == moved
                copied.add(moved.key)
            for flow in source.traffic:
                key = (renamed(flow.source), renamed(flow.destination), flow.routing)
                assert rates.pop(key) == pytest.approx(flow.rate * load, abs=1e-6), key
    assert rates == {}
    assert set(workloads) - copied == {"monitoring/node-exporter"}
    assert workloads["monitoring/node-exporter"].kind == "DaemonSet"
    assert sum(platform.pods_of(w) for w in platform.workloads) >= 2000


SPARK = (
    "name: t\nworkloads:\n"
    "  - {name: driver, namespace: spark, kind: Pod}\n"
    "  - {name: exec, namespace: spark, kind: Pod, owner: driver, replicas: 3}\n"
    "traffic: [{source: spark/exec, destination: spark/exec, rate: 6}]\n"
)


def test_pods_owned_by_a_pod_are_read_as_its_and_recreated_under_a_new_name() -> None:
    """A Spark driver's executors: owned by the driver pod, elastic, each that goes made again
    under a new name; the driver itself is made once, and nothing makes it again."""
    scenario = parse_scenario(SPARK, "s")
    driver, executors = scenario.workloads
    assert workload_objects(executors) == []  # the owner's pod makes them, not the API
    [made] = workload_objects(driver)
    assert made["kind"] == "Pod" and made["metadata"]["name"] == "driver"
    assert not driver.recreated and executors.recreated
    cluster = SimulatedCluster(scenario, Scheduler(0))
    pods = cluster.snapshot.pods
    assert pods["spark/driver"].workload is None
    owned = [pod for pod in pods.values() if pod.workload == WorkloadRef("Pod", "spark", "driver")]
    assert len(owned) == 3 and all(pod.controller_kind == "Pod" for pod in owned)
    gone = cluster.remove(owned[0].key)
    new = cluster.replacement(executors, gone, steering=None)
    assert new.key not in {pod.key for pod in owned}
    assert new.workload == WorkloadRef("Pod", "spark", "driver")
