"""Every rule the planner enforces, one case each, on small clusters."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness import builders as b
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain
from rebalancer.config.pacing import Cooldown
from rebalancer.config.policy import parse_policy
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.cycle import build_view, plan_cycle, propose
from rebalancer.planning.planner import plan
from rebalancer.planning.state import PlannerState, RecentMove, streak_key
from rebalancer.planning.types import Move, Plan
from rebalancer.simulator.run import DEFAULT_POLICY
from rebalancer.strategies.framework import Candidate, ClusterView
from rebalancer.strategies.split_peers import SplitPeers, SplitPeersArgs
from rebalancer.traffic.model import TrafficFailure
from tests.conftest import (
    all_pairs,
    chatty_objects,
    chatty_rates,
    grid_nodes,
    make_policy,
    plan_once,
    pod_keys,
    snapshot_of,
    surge_move,
    traffic_of,
)


def test_a_pair_split_across_zones_is_pulled_together() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves, plan.skipped
    assert plan.after.crossing["zone"] < plan.before.crossing["zone"]
    for move in plan.moves:
        assert move.origin["zone"] != move.destination["zone"]
        assert move.strategy == "split-peers"
    assert sum(m.gain for m in plan.moves) == pytest.approx(
        plan.before.weighted_cost - plan.after.weighted_cost
    )


def test_a_converged_placement_plans_nothing() -> None:
    objects = chatty_objects(["node-a11", "node-a11"], ["node-a11", "node-a11"])
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == () and plan.candidates == 0


@pytest.mark.parametrize(
    ("allowed", "moved"), [(0, 0), (1, 1)], ids=["pdb-exhausted", "pdb-allows-one"]
)
def test_pdb_budget_is_respected(allowed: int, moved: int) -> None:
    objects = chatty_objects(["node-a11", "node-a12", "node-a21"], ["node-b11"] * 3)
    objects.append(b.pdb("client", {"app": "client"}, allowed))
    objects.append(b.pdb("server", {"app": "server"}, 0))
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert len(plan.moves) == moved
    assert all("client" in m.pod for m in plan.moves)
    reasons = {s.reason for s in plan.skipped}
    assert "PDB server allows no more disruptions" in reasons


def test_a_pdb_whose_status_is_not_observed_blocks() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    objects += [
        b.pdb("client", {"app": "client"}, 5, observed=False),
        b.pdb("server", {"app": "server"}, 5, observed=False),
    ]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {
        "PDB client status not yet observed",
        "PDB server status not yet observed",
    }


@pytest.mark.parametrize(
    ("limits", "expected_moves"),
    [
        ({"per_cycle": 1}, 1),
        # One client to zone b, then no server to zone a: it would cross the client that just
        # moved to join it, and the pair would stay split.
        ({"per_workload": 1}, 1),
        ({"per_namespace": 2}, 2),
        ({"per_node": 1, "per_zone": 1}, 1),
        ({"per_cycle": 0}, 0),
    ],
    ids=["per-cycle", "per-workload", "per-namespace", "per-zone", "zero"],
)
def test_limits_cap_the_plan(limits: dict[str, int], expected_moves: int) -> None:
    objects = chatty_objects(
        ["node-a11", "node-a12", "node-a21"], ["node-b11", "node-b12", "node-b21"]
    )
    policy = make_policy(limits=limits)
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert len(plan.moves) == expected_moves
    workloads = [m.workload for m in plan.moves]
    if "per_workload" in limits:
        assert len(set(workloads)) == len(workloads)
    if "per_zone" in limits:
        assert len({m.origin["zone"] for m in plan.moves}) == len(plan.moves)


def test_once_every_zone_has_spent_its_limit_the_candidates_left_are_not_judged() -> None:
    """As when the per-cycle limit is reached, each candidate left is skipped for its zone's
    limit: the opted-out client and the server whose peer already moved are not judged."""
    objects = chatty_objects(
        ["node-a11", "node-a12", "node-a21"], ["node-b11", "node-b12", "node-b21"]
    )
    snapshot = snapshot_of(objects)
    clients, servers = pod_keys(snapshot, "client"), pod_keys(snapshot, "server")
    _opt_out(next(o for o in objects if o["metadata"]["name"] == clients[2].split("/")[1]))
    pairs = zip(clients, servers, strict=True)
    rates = dict(zip(pairs, (100.0, 50.0, 10.0), strict=True))
    plan, _view = plan_once(make_policy(limits={"per_zone": 1}), snapshot_of(objects), rates)
    assert [move.origin["zone"] for move in plan.moves] == ["a", "b"]
    zone_of = {pod: "a" for pod in clients} | {pod: "b" for pod in servers}
    assert {skip.pod: skip.reason for skip in plan.skipped} == {
        pod: f"per-zone limit 1 reached ({zone_of[pod]})"
        for pod in zone_of
        if pod not in {move.pod for move in plan.moves}
    }


def test_a_candidate_in_no_known_zone_is_not_held_back_by_the_zones_limits() -> None:
    """No zone limit counts a pod whose zone is unknown, so zone a's spent limit must not end
    the cycle before it."""
    objects = [
        *grid_nodes(),
        b.node("bare-1"),
        *b.deployment_pods("client", ["node-a11", "bare-1"]),
        *b.deployment_pods("server", ["node-b11", "node-b12"]),
    ]
    snapshot = snapshot_of(objects)
    policy = make_policy(limits={"per_zone": 1}, protections={"min_spread": {"domains": 1}})
    view = build_view(policy, snapshot, traffic_of(chatty_rates(objects)))
    candidates = [
        Candidate(pod=pod, target=Domain(0, ("b",)), gain=gain, reason="", strategy="test")
        for pod, gain in zip(pod_keys(snapshot, "client"), (2.0, 1.0), strict=True)
    ]
    observed = PlannerState().observe(candidates)
    result = plan(
        view,
        candidates,
        PlanningRules.of(policy, view.topology),
        observed,
        now=NOW,
        persistence_required=1,
    )
    assert {move.pod for move in result.moves} == set(pod_keys(snapshot, "client"))


NOW = 1_000_000.0


def recent(workload: str, left: dict[str, str], entered: dict[str, str]) -> RecentMove:
    return RecentMove(
        workload=f"Deployment/default/{workload}", left=left, entered=entered, at=NOW - 60
    )


def test_cooldown_forbids_undoing_a_recent_move() -> None:
    """The server was moved from zone a into b a minute ago: pulling it back to a is a bounce."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(cooldown={"per_workload_seconds": 600})
    state = PlannerState(recent_moves=[recent("server", {"zone": "a"}, {"zone": "b"})])
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), state, NOW)
    assert {m.workload for m in plan.moves} == {"Deployment/default/client"}
    server_skips = [s for s in plan.skipped if "server" in s.pod]
    assert server_skips and all(
        s.reason == "would undo its workload's move into b; cooldown 540s more"
        for s in server_skips
    )


def test_a_workload_may_keep_moving_the_same_way_in_cooldown() -> None:
    """Consolidating a workload takes a move per pod; the cooldown must not stretch that out."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(cooldown={"per_workload_seconds": 600})
    state = PlannerState(
        recent_moves=[
            recent("client", {"zone": "a"}, {"zone": "b"}),
            recent("server", {"zone": "b"}, {"zone": "a"}),
        ]
    )
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), state, NOW)
    assert plan.moves
    assert {m.workload for m in plan.moves} <= {
        "Deployment/default/client",
        "Deployment/default/server",
    }


def test_an_expired_cooldown_allows_the_move_back() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(cooldown={"per_workload_seconds": 30})
    state = PlannerState(recent_moves=[recent("server", {"zone": "a"}, {"zone": "b"})])
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), state, NOW)
    assert plan.moves
    assert not [s for s in plan.skipped if s.category == "cooldown"]


@pytest.mark.parametrize(
    ("location", "target", "undoes"),
    [
        ({"zone": "a", "rack": "r1", "host": "n1"}, {"zone": "b"}, True),
        (
            {"zone": "a", "rack": "r1", "host": "n1"},
            {"zone": "a", "rack": "r1", "host": "n2"},
            False,
        ),
        ({"zone": "b", "rack": "r1", "host": "n5"}, {"zone": "a"}, True),
        ({"zone": "a", "rack": "r2", "host": "n3"}, {"zone": "a", "rack": "r1"}, False),
        ({"zone": "c", "rack": "r1", "host": "n7"}, {"zone": "a", "rack": "r2"}, True),
        ({"zone": "c", "rack": "r1", "host": "n7"}, {"zone": "b"}, False),
    ],
    ids=[
        "out-of-the-rack",
        "within-the-rack",
        "into-the-zone-it-left",
        "same-way",
        "into-the-rack-it-left",
        "elsewhere",
    ],
)
def test_what_undoes_a_move_into_a_rack(
    location: dict[str, str], target: dict[str, str], undoes: bool
) -> None:
    move = RecentMove(
        workload="w", left={"zone": "a", "rack": "r2"}, entered={"zone": "a", "rack": "r1"}, at=0
    )
    assert move.undone_by(location, target) is undoes


def test_moves_are_forgotten_once_their_memory_is_over() -> None:
    state = PlannerState(recent_moves=[recent("server", {"zone": "a"}, {"zone": "b"})])
    assert state.record_moves([], NOW, Cooldown(per_workload_seconds=30, memory_seconds=600))
    assert state.record_moves([], NOW, Cooldown(per_workload_seconds=30, memory_seconds=60)) == (
        state.model_copy(update={"recent_moves": []})
    )


@pytest.mark.parametrize(("cooldown", "kept"), [(30, 1), (600, 2)], ids=["past", "within"])
def test_a_move_made_again_past_its_cooldown_is_remembered_once(cooldown: int, kept: int) -> None:
    """Within the cooldown each move counts towards the workload's moves, so both are kept."""
    state = PlannerState(recent_moves=[recent("server", {"zone": "a"}, {"zone": "b"})])
    again = state.record_moves(
        [surge_move("server")], NOW, Cooldown(per_workload_seconds=cooldown, memory_seconds=900)
    )
    assert [(m.entered, m.at) for m in again.recent_moves][-kept:] == [
        ({"zone": "b"}, NOW - 60),
        ({"zone": "b"}, NOW),
    ][-kept:]
    assert len(again.recent_moves) == kept


def test_streaks_are_kept_best_first_and_the_least_promising_go_when_the_state_is_too_large() -> (
    None
):
    """A large cluster proposes a streak per candidate; a state over its store's size keeps the
    streaks of the highest gains, and a candidate proposed twice keeps its best."""
    candidates = [
        Candidate(
            pod=f"default/pod-{i:05d}",
            target=Domain(0, ("b",)),
            gain=float(i),
            reason="",
            strategy="test",
        )
        for i in range(2000)
    ]
    state = PlannerState().observe(candidates[:1000]).observe([*candidates, candidates[0]])
    assert list(state.streaks)[:3] == [streak_key(c) for c in reversed(candidates[-3:])]
    assert len(state.streaks) == 2000
    assert state.within(len(state.stored())) is state
    fitted = state.within(10_000)
    assert len(fitted.stored().encode()) <= 10_000
    assert len(fitted.stored().encode()) > 9_900  # no more dropped than needed
    assert list(fitted.streaks) == list(state.streaks)[: len(fitted.streaks)]
    assert fitted.streaks[streak_key(candidates[-1])] == 1
    assert state.streaks[streak_key(candidates[0])] == 2
    assert PlannerState(recent_moves=[recent("a", {}, {})] * 200).within(1000).streaks == {}


def test_a_workload_moves_no_more_pods_in_a_cooldown_than_it_has() -> None:
    """Both server pods were moved into zone b a minute ago; one of them moved on within b would
    be a pod moved twice in one cooldown, churn whatever it gains."""
    objects = chatty_objects(["node-b21", "node-b22"], ["node-b11", "node-b12"])
    policy = make_policy(
        cooldown={"per_workload_seconds": 600},
        strategies=[{"name": "split-peers", "args": {"level": "zone", "down_to": "rack"}}],
    )
    moved = [recent("server", {"zone": "a"}, {"zone": "b"})] * 2
    state = PlannerState(recent_moves=moved)
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), state, NOW)
    assert {m.workload for m in plan.moves} == {"Deployment/default/client"}
    server_skips = [s for s in plan.skipped if "server" in s.pod]
    assert server_skips and all(
        s.reason == "moved 2 pods in this cooldown, as many as it has; 540s more"
        for s in server_skips
    )


def test_undoing_a_remembered_move_waits_the_longer_persistence() -> None:
    """The server was moved from zone a into b an hour ago, past its cooldown: pulled back, it
    waits `undo_cycles` cycles in a row, not `cycles`, and then goes (a lasting change). The
    client was moved into a a minute ago, so it stays there."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(
        cooldown={"per_workload_seconds": 600, "memory_seconds": 7200},
        persistence={"cycles": 1, "undo_cycles": 3},
        limits={"per_workload": 2},
    )
    earlier = recent("server", {"zone": "a"}, {"zone": "b"}).model_copy(update={"at": NOW - 3600})
    state = PlannerState(recent_moves=[earlier, recent("client", {"zone": "b"}, {"zone": "a"})])
    snapshot, traffic = snapshot_of(objects), traffic_of(chatty_rates(objects))
    for cycle in (1, 2, 3):
        outcome = plan_cycle(policy, snapshot, traffic, state, now=NOW + cycle)
        assert outcome.plan is not None
        servers = [m for m in outcome.plan.moves if "server" in m.pod]
        if cycle < 3:
            assert not outcome.plan.moves
            held = {s.reason for s in outcome.plan.skipped if "server" in s.pod}
            assert held == {
                f"proposed {cycle} of 3 consecutive cycles, as it would undo its workload's move "
                f"into b {3600 + cycle}s ago"
            }
        else:
            assert servers, outcome.plan.skipped
        state = outcome.state


def test_a_move_waits_until_it_has_persisted() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    snapshot, traffic = snapshot_of(objects), traffic_of(chatty_rates(objects))
    policy = make_policy(persistence={"cycles": 3})
    state = PlannerState()
    for cycle in range(1, 4):
        outcome = plan_cycle(policy, snapshot, traffic, state, now=float(cycle))
        assert outcome.plan is not None
        state = outcome.state
        if cycle < 3:
            assert outcome.plan.moves == ()
            assert outcome.plan.skipped[0].reason == f"proposed {cycle} of 3 consecutive cycles"
    assert outcome.plan is not None and outcome.plan.moves


def test_missing_data_plans_nothing_and_resets_persistence() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    snapshot = snapshot_of(objects)
    policy = make_policy()
    state = plan_cycle(
        policy, snapshot, traffic_of(chatty_rates(objects)), PlannerState(), now=1.0
    ).state
    assert state.streaks
    outcome = plan_cycle(policy, snapshot, TrafficFailure("stale", "old"), state, now=2.0)
    assert outcome.plan is None and outcome.failure is not None
    assert outcome.state.streaks == {}


def _opt_out(pod: b.Obj) -> None:
    pod["metadata"]["annotations"] = {"topology-rebalancer.io/exclude": "true"}


def _empty_dir(pod: b.Obj) -> None:
    pod["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]


def _critical(pod: b.Obj) -> None:
    pod["spec"]["priorityClassName"] = "system-cluster-critical"


def _daemonset(pod: b.Obj) -> None:
    pod["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"


def _not_ready(pod: b.Obj) -> None:
    pod["status"]["conditions"][0]["status"] = "False"


def _never_evict(pod: b.Obj) -> None:
    pod["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def _host_path(pod: b.Obj) -> None:
    pod["spec"]["volumes"] = [
        {"name": "istio-data", "emptyDir": {}},
        {"name": "logs", "hostPath": {"path": "/var/log/app"}},
    ]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (_opt_out, "opted out (topology-rebalancer.io/exclude)"),
        (_empty_dir, "local storage (volume scratch)"),
        (_host_path, "local storage (volume logs)"),
        (_never_evict, 'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'),
        (_critical, "system-critical pod"),
        (_daemonset, "daemonset pod"),
        (_not_ready, "not running and ready"),
    ],
    ids=[
        "opt-out",
        "local-storage",
        "host-path",
        "never-evict",
        "system-critical",
        "daemonset",
        "not-ready",
    ],
)
def test_protected_pods_stay(mutate: b.Mutator, reason: str) -> None:
    objects = [
        *grid_nodes(),
        *b.deployment_pods("client", ["node-a11", "node-a12"], mutate_pod=mutate),
        *b.deployment_pods("server", ["node-b11", "node-b12"], mutate_pod=mutate),
    ]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {reason}


def _mesh_sidecar(pod: b.Obj) -> None:
    """The emptyDirs Istio's injector adds, one memory-backed."""
    pod["spec"]["volumes"] = [
        {"name": "workload-socket", "emptyDir": {}},
        {"name": "credential-socket", "emptyDir": {}},
        {"name": "workload-certs", "emptyDir": {}},
        {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
        {"name": "istio-data", "emptyDir": {}},
    ]


def _named_disposable(pod: b.Obj) -> None:
    pod["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]
    annotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
    pod["metadata"]["annotations"] = {annotation: "tmp, cache"}


def _safe_to_evict(pod: b.Obj) -> None:
    _empty_dir(pod)
    pod["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


@pytest.mark.parametrize(
    "mutate",
    [_mesh_sidecar, _named_disposable, _safe_to_evict],
    ids=["mesh-sidecar", "named-in-the-annotation", "safe-to-evict"],
)
def test_scratch_volumes_do_not_protect_a_pod(mutate: b.Mutator) -> None:
    """As the cluster autoscaler counts local storage: a service mesh's injected scratch volumes
    and memory-backed emptyDirs, volumes the pod names disposable, or a pod marked safe to
    evict. Counted, every pod of an Istio mesh would be protected and nothing would move."""
    objects = [
        *grid_nodes(),
        *b.deployment_pods("client", ["node-a11", "node-a12"], mutate_pod=mutate),
        *b.deployment_pods("server", ["node-b11", "node-b12"], mutate_pod=mutate),
    ]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves
    assert not [s for s in plan.skipped if s.category == "protected"]


def test_a_mesh_scratch_volume_protects_when_the_policy_lists_none() -> None:
    objects = [
        *grid_nodes(),
        *b.deployment_pods("client", ["node-a11", "node-a12"], mutate_pod=_mesh_sidecar),
        *b.deployment_pods("server", ["node-b11", "node-b12"], mutate_pod=_mesh_sidecar),
    ]
    policy = make_policy(protections={"disposable_volumes": []})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {"local storage (volume workload-socket)"}


def _claims_a_volume(pod: b.Obj) -> None:
    name = pod["metadata"]["name"]
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]


def test_a_pod_with_a_claim_moves_only_within_its_zone() -> None:
    """Allowed to move pods with claims, the planner still keeps each in the zone its volume is
    bound to: the clients, which hold claims, stay; the servers come to them."""
    objects = [
        *grid_nodes(),
        *b.deployment_pods("client", ["node-a11", "node-a12"], mutate_pod=_claims_a_volume),
        *b.deployment_pods("server", ["node-b11", "node-b12"]),
    ]
    policy = make_policy(protections={"evict_pvc": True})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert plan.moves
    assert {m.workload for m in plan.moves} == {"Deployment/default/server"}
    assert all(m.destination["zone"] == "a" for m in plan.moves)


def test_evict_mode_evicts_only_where_the_scheduler_would_land_the_replacement() -> None:
    """The client in zone a and the server in zone b pull each other; zone c's empty nodes
    score highest under the scheduler's default profile (least allocated, no pod of the
    workload near). Unsteered, either side's replacement would land in zone c, so evict mode
    evicts nothing; migrate mode steers the replacements and moves."""
    objects = [
        *grid_nodes("a", racks=1),
        *grid_nodes("b", racks=1),
        *grid_nodes("c", racks=1),
        *b.deployment_pods("client", ["node-a11", "node-a12"]),
        *b.deployment_pods("server", ["node-b11", "node-b12"], cpu="6"),
    ]
    snapshot, rates = snapshot_of(objects), chatty_rates(objects)
    evict, _view = plan_once(make_policy(mode="evict"), snapshot, rates)
    assert evict.moves == ()
    landing = {s.reason for s in evict.skipped if s.category == "landing"}
    assert landing and all(
        reason.startswith("evicted, its replacement would land on node-c1") for reason in landing
    )
    steered, _view = plan_once(make_policy(mode="migrate"), snapshot, rates)
    assert steered.moves


def test_evict_mode_does_not_evict_on_a_coin_flip() -> None:
    """The server's replacement would score as high on zone a's two free nodes as on zone b's
    two (its own room counted free), and the scheduler picks among its best at random: half a
    chance to land in the target is not a move. The client's is worse (one node in four)."""
    objects = [
        *grid_nodes("a", racks=1, per_rack=3),
        *grid_nodes("b", racks=1, per_rack=2),
        *b.deployment_pods("client", ["node-a11"]),
        *b.deployment_pods("server", ["node-b11"]),
    ]
    policy = make_policy(mode="evict", protections={"evict_single_replica": True})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert sorted(s.reason for s in plan.skipped if s.category == "landing") == [
        "evicted, its replacement would land in a at best by a coin flip: 2 of the 4 nodes the "
        "scheduler scores highest lie there, node-b11 among the rest",
        "evicted, its replacement would land in b at best by a coin flip: 1 of the 4 nodes the "
        "scheduler scores highest lie there, node-a11 among the rest",
    ]


def test_migrate_mode_moves_only_where_the_steered_replacement_would_land() -> None:
    """A hint is one score among the scheduler's: a worker steered to the host of its four
    siblings, which it would fill, loses there to spreading and least allocated, and its
    replacement would go back to its own zone. Migrate mode does not move it, unless the hint
    is required (it then lands surely) or the check is off."""
    objects = [
        *grid_nodes("a", racks=1),
        *grid_nodes("b", racks=1),
        *b.deployment_pods("worker", ["node-a11"] * 4 + ["node-b11"], cpu="1500m", memory="6Gi"),
    ]
    snapshot = snapshot_of(objects)
    workers = pod_keys(snapshot, "worker")
    rates = all_pairs(workers, workers, 10.0)

    def planned(**migrate: bool) -> Plan:
        policy = make_policy(
            mode="migrate",
            migrate=migrate,
            protections={"min_spread": {"domains": 1}},
            strategies=_split_peers(level="host"),
        )
        return plan_once(policy, snapshot, rates)[0]

    steered = planned()
    assert steered.moves == ()
    assert [(s.category, s.reason) for s in steered.skipped] == [
        (
            "landing",
            "its replacement, steered to a/r1/node-a11, would still land on node-b11, where "
            "the scheduler scores highest with the hint among its scores",
        )
    ]
    for settings in ({"required": True}, {"predict_landing": False}):
        assert [m.node for m in planned(**settings).moves] == ["node-a11"]


def _one_more_desired(obj: b.Obj) -> None:
    obj["spec"]["replicas"] += 1


@pytest.mark.parametrize(
    ("client_nodes", "mutate", "reason"),
    [
        (
            ["node-a11", "node-a12", "node-a21", None],
            None,
            "workload still settling: 1 of its pods not yet Running and Ready",
        ),
        (
            ["node-a11", "node-a12", "node-a21"],
            _one_more_desired,
            "workload still settling: 3 of 4 desired replicas Ready",
        ),
    ],
    ids=["replacement-pending", "replacement-not-created"],
)
def test_a_workload_short_of_ready_replicas_is_not_moved_further(
    client_nodes: list[str | None], mutate: b.Mutator, reason: str
) -> None:
    """The scheduler may be down: a replacement that is not back yet means no more evictions of
    that workload, even where no PDB would stop them."""
    client = b.deployment_pods("client", client_nodes)
    if mutate is not None:
        mutate(client[0])
    objects = [*grid_nodes(), *client, *b.deployment_pods("server", ["node-b11"] * 3)]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert not [m for m in plan.moves if "client" in m.pod]
    client_skips = {s.reason for s in plan.skipped if "client" in s.pod}
    assert client_skips == {reason}
    assert {s.category for s in plan.skipped if "client" in s.pod} == {"settling"}


def _succeeded(obj: b.Obj) -> None:
    obj["status"] = {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}


def test_a_finished_pod_does_not_hold_its_workload_back() -> None:
    """A Job's completed pods stay in the API; they are not a replacement on its way."""
    client = b.deployment_pods("client", ["node-a11", "node-a12", "node-a21", "node-a22"])
    _succeeded(client[-1])
    client[0]["spec"]["replicas"] = 3  # the finished pod is not one of the desired replicas
    objects = [*grid_nodes(), *client, *b.deployment_pods("server", ["node-b11"] * 3)]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    client_skips = {s.pod: s.category for s in plan.skipped if "client" in s.pod}
    assert set(client_skips.values()) == {"below-threshold", "protected"}  # judged, not held


def test_a_pod_on_a_node_without_topology_labels_stays_where_it_is() -> None:
    """Where such a pod runs is unknown, so no gain from moving it can be known either; a node
    with only a zone label still allows zone-level moves, whose gain is known."""
    for node, moved in (("bare-1", False), ("zone-only-1", True)):
        objects = [
            *grid_nodes(),
            b.node("bare-1"),
            b.node("zone-only-1", zone="a"),
            *b.deployment_pods("client", [node, node]),
            *b.deployment_pods("server", ["node-b11", "node-b12"]),
        ]
        plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
        assert all(m.node not in {"bare-1", "zone-only-1"} for m in plan.moves)
        assert any("client" in m.pod for m in plan.moves) == moved


def test_bare_and_single_replica_pods_stay_by_default() -> None:
    objects = [*grid_nodes(), b.pod("bare", "node-a11"), *b.deployment_pods("solo", ["node-b11"])]
    snapshot = snapshot_of(objects)
    rates = {("default/bare", pod_keys(snapshot, "solo")[0]): 50.0}
    plan, _view = plan_once(make_policy(), snapshot, rates)
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {
        "bare pod (no controller recreates it)",
        "single-replica workload",
    }
    allowed = make_policy(protections={"evict_bare_pods": True, "evict_single_replica": True})
    plan, _view = plan_once(allowed, snapshot, rates)
    assert len(plan.moves) == 1


def test_namespace_scope() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(scope={"namespaces": {"include": ["prod"]}})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {"namespace not included"}


def test_no_room_in_the_target_domain_means_no_move() -> None:
    objects = [
        *[b.node(f"node-a{i}", zone="a", rack="r1", cpu="1") for i in (1, 2)],
        *[b.node(f"node-b{i}", zone="b", rack="r1", cpu="1") for i in (1, 2)],
        *b.deployment_pods("client", ["node-a1", "node-a2"], cpu="800m"),
        *b.deployment_pods("server", ["node-b1", "node-b2"], cpu="800m"),
    ]
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert plan.moves == ()
    assert {s.reason for s in plan.skipped} == {
        "no node in the target domain fits (insufficient resources)"
    }


def test_ha_floor_keeps_a_workload_in_two_zones_by_default() -> None:
    objects = chatty_objects(["node-a11", "node-b11"], ["node-b12", "node-b21"])
    plan, _view = plan_once(make_policy(), snapshot_of(objects), chatty_rates(objects))
    assert all(not m.pod.startswith("default/client") for m in plan.moves)
    assert "workload would span 1 zones, below 2" in {s.reason for s in plan.skipped}
    plan, _view = plan_once(
        make_policy(protections={"min_spread": {"domains": 1}}),
        snapshot_of(objects),
        chatty_rates(objects),
    )
    assert any(m.pod.startswith("default/client") for m in plan.moves)


def test_ha_floor_leaves_jobs_free_to_pack() -> None:
    gang = [("node-a11", "w0"), ("node-b11", "w1")]
    objects = [
        *grid_nodes(),
        *(b.pod(name, node, ("Job", "train"), labels={"job-name": "train"}) for node, name in gang),
    ]
    snapshot = snapshot_of(objects)
    workers = pod_keys(snapshot, "w")
    policy = make_policy(strategies=[{"name": "split-peers", "args": {"level": "zone"}}])
    plan, _view = plan_once(policy, snapshot, {(workers[0], workers[1]): 50.0})
    assert len(plan.moves) == 1


def test_two_strategies_never_count_one_gain_twice() -> None:
    objects = [*grid_nodes()]
    gang_nodes = ["node-a11", "node-a12", "node-b11", "node-b12"]
    objects += [
        b.pod(f"w{i}", n, ("Job", "train"), labels={"job-name": "train"})
        for i, n in enumerate(gang_nodes)
    ]
    snapshot = snapshot_of(objects)
    workers = pod_keys(snapshot, "w")
    rates = {(x, y): 10.0 for x in workers for y in workers if x < y}
    policy = make_policy(
        strategies=[
            {"name": "split-peers", "args": {"level": "zone", "min_share": 0.5}},
            {"name": "gang-consolidation", "args": {"level": "zone"}},
        ]
    )
    plan, _view = plan_once(policy, snapshot, rates)
    assert plan.candidates > len({m.pod for m in plan.moves})  # both proposed the same pods
    assert len({m.pod for m in plan.moves}) == len(plan.moves)
    assert sum(m.gain for m in plan.moves) == pytest.approx(
        plan.before.weighted_cost - plan.after.weighted_cost
    )
    assert plan.after.crossing["zone"] == 0


def _split_peers(**args: object) -> list[dict[str, object]]:
    return [{"name": "split-peers", "args": {"level": "zone", **args}}]


def test_split_peers_down_to_host_joins_peers_that_share_a_zone() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-a21", "node-a21"])
    snapshot, rates = snapshot_of(objects), chatty_rates(objects)
    plan, _view = plan_once(make_policy(strategies=_split_peers()), snapshot, rates)
    assert plan.candidates == 0  # one zone already: nothing to do at zone level
    plan, _view = plan_once(make_policy(strategies=_split_peers(down_to="host")), snapshot, rates)
    assert {m.destination.get("host") for m in plan.moves} == {"node-a21"}
    assert plan.after.crossing["rack"] == 0 and plan.after.crossing["host"] == 0


def test_split_peers_falls_back_to_a_wider_domain_when_the_host_is_full() -> None:
    objects = [
        *[node for node in grid_nodes() if node["metadata"]["name"] != "node-a21"],
        b.node("node-a21", zone="a", rack="r2", cpu="1"),
        *b.deployment_pods("client", ["node-a11", "node-a12"]),
        *b.deployment_pods("server", ["node-a21", "node-a21"], mutate_pod=_opt_out),
    ]
    policy = make_policy(strategies=_split_peers(down_to="host"))
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert plan.moves
    assert {m.node for m in plan.moves} == {"node-a22"}
    assert {tuple(m.destination) for m in plan.moves} == {("zone", "rack")}


def test_gang_by_namespace_packs_an_application_of_several_workloads() -> None:
    objects = [
        *grid_nodes(),
        *b.deployment_pods("api", ["node-a11", "node-a12"], namespace="shop"),
        *b.deployment_pods("cache", ["node-a21", "node-b11"], namespace="shop"),
    ]
    snapshot = snapshot_of(objects)
    pods = sorted(snapshot.pods)
    rates = {(x, y): 10.0 for x in pods for y in pods if x < y}
    gang = {"name": "gang-consolidation", "args": {"level": "zone", "group_by": "namespace"}}
    plan, _view = plan_once(
        make_policy(strategies=[gang], protections={"min_spread": {"domains": 1}}), snapshot, rates
    )
    assert [m.pod for m in plan.moves] == [
        p for p in pods if snapshot.pods[p].node_name == "node-b11"
    ]
    assert plan.moves[0].reason == "group namespace shop spans 2 zones but fits in 1"
    by_label = {"name": "gang-consolidation", "args": {"level": "zone"}}
    plan, _view = plan_once(
        make_policy(strategies=[by_label], protections={"min_spread": {"domains": 1}}),
        snapshot,
        rates,
    )
    assert plan.candidates == 0  # the pods carry no job-name label


def _planned_down_to_hosts(objects: list[b.Obj]) -> Plan:
    """A plan of split-peers down to hosts, single replicas allowed to move."""
    singles = {"evict_single_replica": True}
    policy = make_policy(strategies=_split_peers(down_to="host"), protections=singles)
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    return plan


def _thirds(crowded: tuple[str, ...] = ()) -> list[b.Obj]:
    """A client in zone a, its three servers on three hosts of zone b (b11, b21, b22): zone b
    holds all its traffic, rack b/r2 two thirds, no host more than a third. The `crowded`
    hosts are left no room by their server."""

    def node(name: str, zone: str, rack: str) -> b.Obj:
        return b.node(name, zone=zone, rack=rack, cpu="1" if name in crowded else "8")

    return [
        node("node-a11", "a", "r1"),
        node("node-b11", "b", "r1"),
        node("node-b12", "b", "r1"),
        node("node-b21", "b", "r2"),
        node("node-b22", "b", "r2"),
        *b.deployment_pods("client", ["node-a11"]),
        *b.deployment_pods("server", ["node-b11", "node-b21", "node-b22"], cpu="800m"),
    ]


def test_a_move_is_narrowed_to_its_peers_host_within_the_domain_it_was_proposed_for() -> None:
    """Proposed into zone b and rack b/r2, the client goes to a host of rack b/r2 that runs a
    server, in one move; the move persists, and is ranked, as the rack move proposed."""
    objects = _thirds()
    plan = _planned_down_to_hosts(objects)
    (move,) = plan.moves
    assert move.target == Domain(2, ("b", "r2", "node-b21"))
    assert move.reason == "67% of its traffic goes to rack b/r2"
    assert plan.after.crossing["host"] == pytest.approx(20.0)  # with two of its three servers


def test_a_narrowed_move_falls_back_to_the_domain_proposed_when_no_finer_one_has_room() -> None:
    """Every host with a server is full, and so rack b/r2: the client goes into zone b, to the
    one node with room."""
    objects = _thirds(crowded=("node-b11", "node-b21", "node-b22"))
    plan = _planned_down_to_hosts(objects)
    (move,) = plan.moves
    assert move.target == Domain(0, ("b",))
    assert move.node == "node-b12"


def _one_server_in_each_zone(*, more_in: str | None = None) -> list[b.Obj]:
    """A client on node-a11 and one server, which stays, on each of node-a12, node-b11 and
    node-c11: a third of its traffic in each zone, and all it has within its rack on host a12.
    `more_in`: a second server on that node."""
    servers = ["node-a12", "node-b11", "node-c11"] + ([more_in] if more_in else [])
    return [
        *(b.node(f"node-{z}1{n}", zone=z, rack="r1") for z in "abc" for n in "12"),
        *b.deployment_pods("client", ["node-a11"]),
        *b.deployment_pods("server", servers, mutate_pod=_opt_out),
    ]


def test_a_pod_joins_the_host_holding_what_it_sends_within_its_rack() -> None:
    """No zone, rack or host holds half of the client's traffic, and none can: its servers are
    spread over the zones. Within its rack, all it sends goes to node-a12, and only a move
    there can gain: it moves there."""
    objects = _one_server_in_each_zone()
    plan = _planned_down_to_hosts(objects)
    (move,) = plan.moves
    assert move.target == Domain(2, ("a", "r1", "node-a12"))
    assert move.reason == "100% of its traffic within rack a/r1 goes to host a/r1/node-a12"


def test_a_pod_does_not_move_within_a_domain_another_holds_more_of_its_traffic_than() -> None:
    """With two servers in zone b, the client belongs there: a move to node-a12 first would
    be undone by the move to zone b. It is not proposed."""
    objects = _one_server_in_each_zone(more_in="node-b12")
    view = build_view(
        make_policy(strategies=_split_peers(down_to="host")),
        snapshot_of(objects),
        traffic_of(chatty_rates(objects)),
    )
    args = SplitPeersArgs(level="zone", down_to="host")
    targets = {c.target for c in SplitPeers(args).propose(view)}
    assert Domain(2, ("a", "r1", "node-a12")) not in targets
    assert Domain(0, ("b",)) in targets


def _boxed_in_pair(**policy: Any) -> tuple[Plan, ClusterView]:
    """A client in zone a and its server in zone b, each on a node with no room for the other;
    zone c has room for both."""
    objects = [
        b.node("node-a1", zone="a", rack="r1", cpu="1"),
        b.node("node-b1", zone="b", rack="r1", cpu="1"),
        b.node("node-c1", zone="c", rack="r1", cpu="1"),
        b.node("node-c2", zone="c", rack="r1", cpu="1"),
        *b.deployment_pods("client", ["node-a1"], cpu="800m"),
        *b.deployment_pods("server", ["node-b1"], cpu="800m"),
    ]
    single_replicas = {"protections": {"evict_single_replica": True}}
    return plan_once(
        make_policy(**single_replicas, **policy), snapshot_of(objects), chatty_rates(objects)
    )


def test_a_boxed_in_pair_moves_together_into_a_third_zone() -> None:
    plan, view = _boxed_in_pair()
    assert sorted(m.destination["zone"] for m in plan.moves) == ["c", "c"]
    assert {m.workload for m in plan.moves} == {
        "Deployment/default/client",
        "Deployment/default/server",
    }
    assert len({m.node for m in plan.moves}) == 2  # one node each: neither holds both
    assert plan.after.crossing["zone"] == 0
    assert sum(m.gain for m in plan.moves) == pytest.approx(
        plan.before.weighted_cost - plan.after.weighted_cost
    )
    free = {
        name: view.occupancy.free(node).cpu_millis for name, node in view.snapshot.nodes.items()
    }
    assert free == {"node-a1": 200, "node-b1": 200, "node-c1": 1000, "node-c2": 1000}  # unchanged


def test_a_joint_move_is_made_whole_or_not_at_all() -> None:
    """The server's PDB refuses its half of a joint move, so the client's half must leave no
    trace either: a later move that gains only if the client had moved is not made."""
    objects = [
        *[b.node(f"node-{zone}1", zone=zone, rack="r1", cpu="1") for zone in "abc"],
        b.node("node-b2", zone="b", rack="r1", cpu="1"),
        *b.deployment_pods("client", ["node-a1", "node-a1"], cpu="400m"),
        *b.deployment_pods("server", ["node-b1", "node-b1"], cpu="400m"),
        *b.deployment_pods("peer", ["node-b2", "node-b2"], cpu="100m"),
        b.pdb("server", {"app": "server"}, 0),
    ]
    snapshot = snapshot_of(objects)
    client, server, peer = (pod_keys(snapshot, name)[0] for name in ("client", "server", "peer"))
    policy = make_policy()
    view = build_view(policy, snapshot, traffic_of({(client, server): 10.0, (client, peer): 5.0}))
    zone_c = view.topology.domain_of(view.topology.node_locations["node-c1"], 0)
    assert zone_c is not None
    joint = Candidate(client, zone_c, 100.0, "test", "split-peers", ((server, zone_c),))
    follower = Candidate(peer, zone_c, 50.0, "test", "split-peers")
    state = PlannerState().observe([joint, follower])
    result = plan(
        view,
        [joint, follower],
        PlanningRules.of(policy, view.topology),
        state,
        now=NOW,
        persistence_required=1,
    )
    assert result.moves == ()
    skips = {s.pod: s for s in result.skipped}
    assert skips[client].reason == f"{server}: PDB server allows no more disruptions"
    assert skips[peer].category == "below-threshold"  # the client did not move, so no gain


def test_proposing_leaves_the_view_as_the_cluster_is() -> None:
    """Strategies check room on the shared view; a reservation left there would make the planner
    see pods that do not exist."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(strategies=_split_peers(down_to="host"))
    view = build_view(policy, snapshot_of(objects), traffic_of(chatty_rates(objects)))
    before = dict(view.occupancy.requested)
    assert propose(policy, view)
    assert view.occupancy.requested == before


def test_each_move_takes_the_least_loaded_node_as_earlier_moves_left_it() -> None:
    """Zone b's empty nodes b21 and b22 are level, so the name picks b21 first; once the first
    replacement is reserved there, b22 is the freer."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b11", "node-b12"])
    policy = make_policy(protections={"min_spread": {"domains": 1}})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    assert [(move.destination, move.node) for move in plan.moves] == [
        ({"zone": "b"}, "node-b21"),
        ({"zone": "b"}, "node-b22"),
    ]


def test_streak_keys_name_each_move_with_a_joint_move_s_in_pod_order() -> None:
    """The keys are kept in the saved state from cycle to cycle: their text must not change."""
    rack = Domain(1, ("a", "r2"))
    alone = Candidate("default/web-1", rack, 1.0, "", "split-peers")
    joint = Candidate(
        "default/web-1", rack, 1.0, "", "split-peers", companions=(("default/api-1", rack),)
    )
    assert streak_key(alone) == "default/web-1->1:a/r2"
    assert streak_key(joint) == "default/api-1->1:a/r2+default/web-1->1:a/r2"


def test_a_client_and_its_server_never_cross_in_one_cycle() -> None:
    """Each would gain by joining the other; moving both leaves them as split as before."""
    objects = chatty_objects(
        ["node-a11", "node-a12", "node-a21"], ["node-b11", "node-b12", "node-b21"]
    )
    policy = make_policy(limits={"per_workload": 1}, protections={"min_spread": {"domains": 1}})
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects))
    zones = {move.destination["zone"] for move in plan.moves}
    assert plan.moves and len(zones) == 1
    refused = [s for s in plan.skipped if s.reason.startswith("a peer moved to join it in")]
    assert refused and all(s.category == "cooldown" for s in refused)


def _chain_objects() -> list[b.Obj]:
    """A frontend pinned in zone b calls search, and each search pod calls the geo pod on its
    node in zone a: search gains nothing alone (what it saves with the frontend it loses with
    geo), and geo nothing at all, so only the two together pay."""
    return [
        *grid_nodes(),
        *b.deployment_pods("frontend", ["node-b11"], mutate_pod=_opt_out),
        *b.deployment_pods("search", ["node-a11", "node-a21"]),
        *b.deployment_pods("geo", ["node-a11", "node-a21"]),
    ]


def _chain_rates(snapshot: Snapshot) -> dict[tuple[str, str], float]:
    (frontend,) = pod_keys(snapshot, "frontend")
    searches, geos = pod_keys(snapshot, "search"), pod_keys(snapshot, "geo")
    rates = {(frontend, search): 10.0 for search in searches}
    rates.update({(search, geo): 10.0 for search, geo in zip(searches, geos, strict=True)})
    return rates


def test_a_chain_moves_together_where_no_pod_of_it_pays_alone() -> None:
    snapshot = snapshot_of(_chain_objects())
    rates = _chain_rates(snapshot)
    alone = make_policy(strategies=_split_peers(chain=1, chain_share=0.25))
    plan, _view = plan_once(alone, snapshot, rates)
    assert plan.moves == ()
    chained = make_policy(
        strategies=_split_peers(chain=2, chain_share=0.25), limits={"per_workload": 1}
    )
    plan, _view = plan_once(chained, snapshot, rates)
    moved = {(m.workload, m.destination["zone"], m.node) for m in plan.moves}
    # Each chain is a search pod and the geo pod on its node, moved into zone b together.
    assert {workload for workload, _zone, _node in moved} == {
        "Deployment/default/search",
        "Deployment/default/geo",
    }
    assert {zone for _workload, zone, _node in moved} == {"b"}
    assert len(plan.moves) == 2 and plan.moves[0].gain == plan.moves[1].gain
    assert plan.moves[0].reason.startswith(f"chain of {plan.moves[0].pod}, ") or (
        plan.moves[1].reason.startswith(f"chain of {plan.moves[1].pod}, ")
    )
    # Zone weight 10, rack 3: the frontend's 10 saves 10 x (10 - 3), the pair's own 10 now
    # crosses a rack (3) where it shared a host (0): 70 - 30.
    assert sum(m.gain for m in plan.moves) == pytest.approx(40.0)
    assert plan.before.weighted_cost - plan.after.weighted_cost == pytest.approx(40.0)


def test_a_chain_is_no_longer_than_its_args_allow_nor_proposed_without_room() -> None:
    objects = [
        *[node for node in grid_nodes() if not node["metadata"]["name"].startswith("node-b")],
        b.node("node-b11", zone="b", rack="r1", cpu="1"),
        *b.deployment_pods("frontend", ["node-b11"], mutate_pod=_opt_out),
        *b.deployment_pods("search", ["node-a11", "node-a21"]),
        *b.deployment_pods("geo", ["node-a11", "node-a21"]),
    ]
    snapshot = snapshot_of(objects)
    policy = make_policy(strategies=_split_peers(chain=2, chain_share=0.25))
    view = build_view(policy, snapshot, traffic_of(_chain_rates(snapshot)))
    assert not [c for c in propose(policy, view) if c.companions]  # zone b has one full node
    snapshot = snapshot_of(_chain_objects())
    view = build_view(policy, snapshot, traffic_of(_chain_rates(snapshot)))
    chains = [c for c in propose(policy, view) if c.companions]
    assert chains and all(len(c.companions) == 1 for c in chains)


def _undo_state(saved: float | None) -> PlannerState:
    """The server moved from zone a into b an hour ago, saving `saved`; the clients into a a
    minute ago, so they stay there."""
    earlier = recent("server", {"zone": "a"}, {"zone": "b"}).model_copy(
        update={"at": NOW - 3600, "gain": saved}
    )
    return PlannerState(recent_moves=[earlier, recent("client", {"zone": "b"}, {"zone": "a"})])


@pytest.mark.parametrize(("saved", "moved"), [(None, True), (10.0, True), (1000.0, False)])
def test_undoing_a_remembered_move_must_save_twice_what_it_saved(
    saved: float | None, moved: bool
) -> None:
    """Moving a server pod back into zone a saves 2 x 10 x (10 - 3) = 140 (two clients, zone
    weight 10, and a rack, 3, still crossed as far as is known): more than twice 10, less than
    twice 1000. A move remembered without its gain (state from an older version) holds
    nothing."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(
        cooldown={"per_workload_seconds": 600, "memory_seconds": 7200},
        persistence={"cycles": 1, "undo_cycles": 1},
        protections={"min_spread": {"domains": 1}},
        strategies=[{"name": "split-peers", "args": {"level": "zone", "chain": 1}}],
    )
    plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), _undo_state(saved))
    servers = [m for m in plan.moves if m.workload == "Deployment/default/server"]
    assert bool(servers) is moved
    if not moved:
        held = {s.reason for s in plan.skipped if "server" in s.pod}
        assert held == {
            "would undo its workload's move into b, which saved 1e+03, for less than twice that "
            "(140)"
        }


def test_a_companion_never_undoes_a_remembered_move() -> None:
    """Past its cooldown the server may go back to zone a for its own gain, but not be taken
    there as a client's companion."""
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(
        cooldown={"per_workload_seconds": 600, "memory_seconds": 7200},
        persistence={"cycles": 1, "undo_cycles": 1},
        protections={"min_spread": {"domains": 1}},
    )
    snapshot = snapshot_of(objects)
    view = build_view(policy, snapshot, traffic_of(chatty_rates(objects)))
    client, server = pod_keys(snapshot, "client")[0], pod_keys(snapshot, "server")[0]
    rack = Domain(1, ("a", "r2"))
    joint = Candidate(client, rack, 1.0, "", "split-peers", companions=((server, rack),))
    alone = Candidate(server, rack, 1.0, "", "split-peers")
    rules = PlanningRules.of(policy, view.topology)
    for candidate, moves in ((joint, 0), (alone, 1)):
        state = _undo_state(None).observe([candidate])
        result = plan(view, [candidate], rules, state, now=NOW, persistence_required=1)
        assert len(result.moves) == moves, result.skipped
        if not moves:
            (skip,) = result.skipped
            assert skip.reason == (
                f"{server}: would undo its workload's move into b: a pod is never taken along by "
                "another's move out of where its workload was moved"
            )


def test_of_equal_gains_the_plan_makes_the_fewer_moves() -> None:
    """Orders in zones a and b call a cache in a, b and c evenly, each orders pod beside a cache
    pod. Moving the cache pod of zone c beside an orders pod saves as much as moving an orders
    pod and a cache pod into zone c: one move, not two. No pod is given a reason naming a move
    its workload never made."""
    objects = [
        *grid_nodes("abc"),
        *b.deployment_pods("orders", ["node-a11", "node-b11"]),
        *b.deployment_pods("cache", ["node-a11", "node-b11", "node-c11"]),
    ]
    snapshot = snapshot_of(objects)
    rates = traffic_of(all_pairs(pod_keys(snapshot, "orders"), pod_keys(snapshot, "cache"), 10))
    policy = parse_policy(DEFAULT_POLICY + "mode: migrate\n", "test")
    state, moves = PlannerState(), list[Move]()
    after = 0.0
    for cycle in range(8):
        now = NOW + cycle * policy.interval_seconds
        outcome = plan_cycle(policy, snapshot, rates, state, now=now)
        assert outcome.plan is not None
        state = outcome.state.record_moves(outcome.plan.moves, now, policy.cooldown)
        moves += outcome.plan.moves
        after = outcome.plan.after.weighted_cost
        pods = dict(snapshot.pods)
        for move in outcome.plan.moves:
            pods[move.pod] = msgspec.structs.replace(pods[move.pod], node_name=move.node)
        snapshot = Snapshot(snapshot.nodes, pods, snapshot.pdbs, snapshot.workloads)
        entered = {(m.workload, "/".join(m.destination.values())) for m in moves}
        for skip in outcome.plan.skipped:
            if "workload's move into " in skip.reason:
                domain = skip.reason.split("workload's move into ")[1].split(";")[0]
                domain = domain.split(",")[0].split(":")[0].split(" ")[0]
                workload = str(snapshot.pods[skip.pod].workload)
                assert (workload, domain) in entered, skip
    assert [(m.pod, m.node) for m in moves] == [(pod_keys(snapshot, "cache")[2], "node-a11")]
    assert after == 300


def test_a_pod_that_owns_pods_stays_and_the_pods_it_owns_move_one_by_one() -> None:
    """A Spark driver and its executors: deleting the driver deletes every executor with it, so
    it never moves, even where bare pods may; the executors are elastic (the driver makes a new
    one for each that goes), so they move as a Deployment's pods do, not as a gang."""
    objects = [*grid_nodes(), b.pod("driver", "node-a11")]
    placed = ["node-a11", "node-a12", "node-b11", "node-b12"]
    objects += [b.pod(f"exec-{i}", node, ("Pod", "driver")) for i, node in enumerate(placed)]
    snapshot = snapshot_of(objects)
    executors = pod_keys(snapshot, "exec")
    rates = all_pairs(executors, executors, 10.0) | all_pairs(executors, ["default/driver"], 5.0)
    policy = make_policy(protections={"evict_bare_pods": True})
    plan, _view = plan_once(policy, snapshot, {k: v for k, v in rates.items() if k[0] != k[1]})
    reasons = {skip.pod: skip.reason for skip in plan.skipped}
    assert reasons["default/driver"] == "owns 4 pod(s), which would be deleted with it"
    moved = {move.pod for move in plan.moves}
    assert moved and moved <= set(executors)
    assert all(move.job is None for move in plan.moves)
