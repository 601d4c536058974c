"""Properties of every plan, on random clusters: nothing planned breaks a limit, a PDB, capacity or
a spread constraint; the predicted cost never rises; gains add up to exactly the cost saved."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import builders as b
from rebalancer.cluster.fit import Occupancy
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.scoring import SpreadWeights, Steering, best, scores, surely_inside
from rebalancer.cluster.selectors import matches_label_selector
from rebalancer.cluster.topology import Domain, first_split
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import price_of
from rebalancer.cost.figures import Figures, Tally
from rebalancer.planning.cycle import build_view
from rebalancer.planning.types import Plan
from rebalancer.strategies.split_peers import SplitPeers, SplitPeersArgs
from tests.conftest import make_policy, plan_once, pod_pairs_of, snapshot_of, traffic_of

NODES = [(f"node-{z}{r}", z, f"r{r}") for z in "abc" for r in (1, 2)]


@dataclass
class Case:
    snapshot: Snapshot
    rates: dict[tuple[str, str], float]
    policy: Policy


def _spread(app: str) -> b.Mutator:
    def mutate(pod: b.Obj) -> None:
        pod["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": b.ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]

    return mutate


@st.composite
def clusters(draw: st.DrawFn) -> Case:
    objects: list[b.Obj] = []
    free: dict[str, int] = {}
    for name, zone, rack in NODES:
        cpu = draw(st.integers(2, 6))
        free[name] = cpu * 1000
        objects.append(b.node(name, zone=zone, rack=rack, cpu=str(cpu)))
    apps = []
    for index in range(draw(st.integers(2, 5))):
        app = f"app{index}"
        cpu = draw(st.sampled_from([250, 500, 1000]))
        wanted = draw(st.lists(st.sampled_from([n for n, _, _ in NODES]), min_size=1, max_size=4))
        placed = [n for n in wanted if free[n] >= cpu]
        for node_name in placed:
            free[node_name] -= cpu
        if not placed:
            continue
        spread = draw(st.booleans())
        objects += b.deployment_pods(
            app, placed, cpu=f"{cpu}m", mutate_pod=_spread(app) if spread else None
        )
        if draw(st.booleans()):
            objects.append(b.pdb(app, {"app": app}, draw(st.integers(0, 2))))
        apps.append(app)
    if draw(st.booleans()):
        # A node deleted before its pods are gone (an autoscaler's scale-down): its pods stay
        # bound to a node the snapshot lacks.
        used = sorted({o["spec"]["nodeName"] for o in objects if o["kind"] == "Pod"})
        gone = draw(st.sampled_from(used))
        objects = [o for o in objects if o["kind"] != "Node" or o["metadata"]["name"] != gone]
    snapshot = snapshot_of(objects)
    pods_of = {a: [k for k, p in snapshot.pods.items() if p.labels.get("app") == a] for a in apps}
    rates: dict[tuple[str, str], float] = {}
    for _ in range(draw(st.integers(1, 6))):
        first, second = draw(st.sampled_from(apps)), draw(st.sampled_from(apps))
        rate = draw(st.floats(0.5, 100))
        for x in pods_of[first]:
            for y in pods_of[second]:
                if x != y:
                    rates[(x, y)] = rate
    limit = st.one_of(st.none(), st.integers(0, 3))
    limits: dict[str, Any] = {
        key: draw(limit)
        for key in ("per_cycle", "per_node", "per_namespace", "per_workload", "per_zone")
    }
    strategies = [
        {"name": "split-peers", "args": {"level": draw(st.sampled_from(["zone", "rack"]))}}
    ]
    if draw(st.booleans()):
        strategies.append(
            {"name": "gang-consolidation", "args": {"level": "zone", "group_by": "community"}}
        )
    policy = make_policy(
        limits=limits,
        strategies=strategies,
        protections={"evict_single_replica": draw(st.booleans())},
    )
    return Case(snapshot, rates, policy)


def _assert_within_limits(plan: Plan, case: Case) -> None:
    limits = case.policy.limits
    pods = case.snapshot.pods
    scopes: dict[str, list[str | None]] = {
        "per_node": [pods[m.pod].node_name for m in plan.moves],
        "per_namespace": [pods[m.pod].namespace for m in plan.moves],
        "per_workload": [m.workload for m in plan.moves],
        "per_zone": [m.origin["zone"] for m in plan.moves],
    }
    if limits.per_cycle is not None:
        assert len(plan.moves) <= limits.per_cycle
    for name, values in scopes.items():
        limit = getattr(limits, name)
        if limit is not None:
            assert max(Counter(values).values(), default=0) <= limit, name


def _assert_pdbs_hold(plan: Plan, case: Case) -> None:
    for pdb in case.snapshot.pdbs:
        selected = [case.snapshot.pods[m.pod] for m in plan.moves]
        disrupted = [
            pod
            for pod in selected
            if pod.namespace == pdb.namespace and matches_label_selector(pdb.selector, pod.labels)
        ]
        assert len(disrupted) <= pdb.disruptions_allowed


def _assert_capacity_holds(plan: Plan, case: Case) -> None:
    """Replacements land where room was found, while the evicted pods still hold theirs."""
    occupancy = Occupancy.from_snapshot(case.snapshot)
    for move in plan.moves:
        occupancy.reserve(case.snapshot.pods[move.pod], move.node)
    for move in plan.moves:
        free = occupancy.free(case.snapshot.nodes[move.node])
        assert free.cpu_millis >= 0 and free.memory_bytes >= 0 and free.pods >= 0


def _zone_skew(case: Case, app: str, placement: dict[str, str]) -> int:
    counts: Counter[str] = Counter(dict.fromkeys((zone for _, zone, _ in NODES), 0))
    for key, pod in case.snapshot.pods.items():
        node = case.snapshot.nodes.get(placement[key])
        if pod.labels.get("app") == app and node is not None:
            counts[node.labels[b.ZONE_LABEL]] += 1
    return max(counts.values()) - min(counts.values())


def _assert_spread_holds(plan: Plan, case: Case) -> None:
    before = {key: pod.node_name or "" for key, pod in case.snapshot.pods.items()}
    after = dict(before) | {m.pod: m.node for m in plan.moves}
    spread_apps = {p.labels["app"] for p in case.snapshot.pods.values() if p.spread_constraints}
    for app in spread_apps:
        assert _zone_skew(case, app, after) <= max(1, _zone_skew(case, app, before))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters())
def test_every_plan_is_safe_and_never_raises_the_cost(case: Case) -> None:
    plan, view = plan_once(case.policy, case.snapshot, case.rates)
    _assert_within_limits(plan, case)
    _assert_pdbs_hold(plan, case)
    _assert_capacity_holds(plan, case)
    _assert_spread_holds(plan, case)
    assert plan.after.weighted_cost <= plan.before.weighted_cost + 1e-6
    saved = plan.before.weighted_cost - plan.after.weighted_cost
    assert abs(sum(m.gain for m in plan.moves) - saved) <= 1e-6 * max(1.0, saved)
    assert len({m.pod for m in plan.moves}) == len(plan.moves)
    nodes = case.snapshot.nodes
    assert all(case.snapshot.pods[m.pod].node_name in nodes for m in plan.moves)
    # The predicted figures are re-counted over the moved pods' pairs only: they must equal a
    # full count of the moved model.
    moved = view.cost.copy()
    for move in plan.moves:
        moved.move(move.pod, move.target)
    recount = moved.figures(case.snapshot, price_of(case.policy, view.topology))
    assert recount.weighted_cost == pytest.approx(plan.after.weighted_cost, abs=1e-6)
    assert recount.crossing == pytest.approx(plan.after.crossing, abs=1e-6)
    expected, predicted = _by_pair(recount), _by_pair(plan.after)
    assert expected.keys() == predicted.keys()
    for pair, figures in expected.items():
        assert predicted[pair] == pytest.approx(figures, abs=1e-6)


def _by_pair(figures: Figures) -> dict[tuple[str, str], tuple[float, float]]:
    return {f.workloads: (f.rate, f.weighted_cost) for f in figures.by_workload_pair}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters())
def test_a_converged_placement_plans_nothing(case: Case) -> None:
    """Replan on the placement the model predicts until nothing is left: then nothing moves."""
    snapshot = case.snapshot
    for _round in range(30):
        plan, _view = plan_once(case.policy, snapshot, case.rates)
        if not plan.moves:
            break
        snapshot = _applied(snapshot, plan)
    plan, _view = plan_once(case.policy, snapshot, case.rates)
    assert plan.moves == ()


def _applied(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """The cluster after the plan: each moved pod runs on the node the planner found for it."""
    pods = dict(snapshot.pods)
    for move in plan.moves:
        pods[move.pod] = msgspec.structs.replace(pods[move.pod], node_name=move.node)
    return Snapshot(snapshot.nodes, pods, snapshot.pdbs, snapshot.workloads)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters())
def test_the_array_tally_makes_the_sums_of_a_pair_by_pair_count(case: Case) -> None:
    """Bit for bit, order of the workload pairs included, before and after the plan's moves
    (which leave the levels below a target unknown)."""
    plan, view = plan_once(case.policy, case.snapshot, case.rates)
    start = pod_pairs_of(view)
    moved = start.copy()
    for move in plan.moves:
        moved.move(move.pod, move.target)
    for model in (start, moved):
        tally = model.tally(case.snapshot)
        counted = Tally(tally.weights, tally.names)
        for a, b_, rate in model.edges():
            counted.count(a, b_, rate, first_split(model.locations[a], model.locations[b_]), 1.0)
        assert tally.split_at == counted.split_at
        assert (tally.total, tally.weighted) == (counted.total, counted.weighted)
        assert list(tally.pairs.items()) == list(counted.pairs.items())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(), min_share=st.sampled_from([0.3, 0.5, 1.0]))
def test_split_peers_proposes_every_domain_that_holds_the_share_and_no_other(
    case: Case, min_share: float
) -> None:
    """Against a direct sum over each pod's peers, at every level from zone down to host, the
    share of a domain taken of the pod's traffic within the narrowest domain holding both, as
    long as each domain down to it holds at least as much as any other at its level."""
    _plan, view = plan_once(case.policy, case.snapshot, case.rates)
    topology, cost = view.topology, view.cost
    args = SplitPeersArgs(level="zone", down_to="host", min_share=min_share)
    proposed = [c for c in SplitPeers(args).propose(view) if not c.companions]
    expected = []
    for pod in sorted(cost.peers):
        total, sent = 0.0, defaultdict[Domain, float](float)
        for peer, rate in cost.peers[pod].items():
            total += rate
            for level in range(len(topology.levels)):
                there = topology.domain_of(cost.locations[peer], level)
                if there is not None:
                    sent[there] += rate
        for level in range(len(topology.levels)):
            here = topology.domain_of(cost.locations[pod], level)
            if here is None:
                continue
            holding = []
            for there, weight in sent.items():
                if there.level != level or there == here or weight <= sent.get(here, 0.0):
                    continue
                scope = total
                for wider in range(first_split(here.key, there.key)):
                    home = Domain(wider, here.key[: wider + 1])
                    elsewhere = [w for d, w in sent.items() if d.level == wider and d != home]
                    if sent.get(home, 0.0) < max(elsewhere, default=0.0):
                        break
                    scope = sent.get(home, 0.0)
                if weight / scope >= min_share:
                    holding.append((there, weight))
            for there, _weight in sorted(holding, key=lambda item: (-item[1], item[0].key)):
                if cost.gain(pod, there) > 0:
                    expected.append((pod, there))
    assert [(c.pod, c.target) for c in proposed] == expected
    for candidate in proposed:
        assert candidate.gain == pytest.approx(cost.gain(candidate.pod, candidate.target))


@st.composite
def crowded(draw: st.DrawFn) -> Snapshot:
    """One workload's pods, 0 to 12 of them a node, on nodes of 1 to 8 CPUs: nodes crowded
    with siblings score low for spreading and least allocated, enough to beat the hint."""
    objects: list[b.Obj] = []
    placed: list[str] = []
    for name, zone, rack in NODES:
        cpu = draw(st.integers(1, 8))
        objects.append(b.node(name, zone=zone, rack=rack, cpu=str(cpu)))
        placed += [name] * min(draw(st.integers(0, 12)), cpu * 4)
    return snapshot_of(objects + b.deployment_pods("app", placed or ["node-a1"], cpu="250m"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=crowded())
def test_a_target_surely_outscoring_the_rest_holds_every_best_node(snapshot: Snapshot) -> None:
    """Whenever `surely_inside` says a steered replacement lands in the target without scoring
    the rest of the cluster, scoring every node agrees: the best nodes are all in the target."""
    occupancy = Occupancy.from_snapshot(snapshot)
    topology = build_view(make_policy(), snapshot, traffic_of({})).topology
    weights = SpreadWeights.of(snapshot)
    for pod in snapshot.pods.values():
        assert pod.node_name is not None
        occupancy.release(pod)
        for target, members in topology.nodes_by_domain.items():
            steering = Steering(target.node_labels(topology.levels), required=False)
            if surely_inside(pod, snapshot, occupancy, steering, members, weights=weights):
                scored = scores(pod, snapshot, occupancy, within={}, steering=steering)
                assert set(best(scored)) <= set(members)
        occupancy.reserve(pod, pod.node_name)
