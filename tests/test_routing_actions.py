"""What a cycle says and does about routing: Events due, at most so often; changes only where the
policy and the Service's own annotation allow; and the client that makes them."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from kubernetes import client

from rebalancer.clients.routing import NOT_SET, Changed, RoutingClient
from rebalancer.cluster.model import Service, Snapshot
from rebalancer.config.policy import Policy
from rebalancer.cost.routing import ROUTING_ANNOTATION, RoutingAdvice
from rebalancer.planning.routing import (
    CHANGED,
    EVENTS_PER_CYCLE,
    NO_ENDPOINT,
    RECOMMENDED,
    REVERTED,
    WOULD_CHANGE,
    RoutingActions,
    RoutingChange,
    RoutingMemory,
    routing_actions,
)
from tests.conftest import make_policy

HOUR = 3600.0


def _service(name: str, namespace: str = "shop", **annotations: str) -> Service:
    return Service(
        namespace=namespace,
        name=name,
        selector={"app": name},
        traffic_distribution=None,
        internal_traffic_policy="Cluster",
        annotations=annotations,
        resource_version=f"rv-{name}",
    )


def _advice(
    key: str, crossing: float = 60.0, after: float = 10.0, missing: tuple[str, ...] = ()
) -> RoutingAdvice:
    return RoutingAdvice(
        service=key,
        today="Cluster",
        recommended="PreferSameZone" if after < crossing else None,
        calls=100.0,
        crossing_today=crossing,
        crossing_recommended=after,
        zones_without_endpoint=missing,
        monthly_saved=12.5,
    )


def _snapshot(*services: Service) -> Snapshot:
    return Snapshot(services={s.key: s for s in services})


APPLY: dict[str, Any] = {"routing": {"apply": True}}
OPTED_IN = {ROUTING_ANNOTATION: "apply"}


def _policy(settings: dict[str, Any] | None = None, mode: str = "evict") -> Policy:
    return make_policy(mode=mode, **(settings or {}))


NONE = RoutingMemory()


def test_a_recommendation_is_said_once_an_hour_and_again_at_once_when_it_changes() -> None:
    snapshot, advice = _snapshot(_service("api")), [_advice("shop/api")]
    first = routing_actions(advice, snapshot, _policy(), 0.0, NONE)
    [said] = first.announcements
    assert (said.service, said.reason, first.changes) == ("shop/api", RECOMMENDED, ())
    assert said.message == (
        "spec.trafficDistribution: PreferSameZone would keep 50 of the 60 now crossing zones "
        "(about 12.50 USD a month) in their zone: set it"
    )
    later = routing_actions(advice, snapshot, _policy(), HOUR - 1, first.memory)
    assert later.announcements == ()
    # The figures of a later cycle differ; the Event waits all the same.
    moved = routing_actions([_advice("shop/api", 70.0)], snapshot, _policy(), 10, first.memory)
    assert moved.announcements == ()
    again = routing_actions(advice, snapshot, _policy(), HOUR, later.memory)
    assert [a.reason for a in again.announcements] == [RECOMMENDED]
    changed = [_advice("shop/api", missing=("c",))]
    now_missing = routing_actions(changed, snapshot, _policy(), 20, first.memory)
    assert "no ready endpoint in c" in now_missing.announcements[0].message


def test_large_rates_read_as_numbers() -> None:
    advice = [_advice("shop/api", crossing=123_456_789.0, after=3_456_789.0)]
    [said] = routing_actions(advice, _snapshot(_service("api")), _policy(), 0, NONE).announcements
    assert "would keep 120,000,000 of the 123,456,789 now crossing zones" in said.message


def test_a_service_without_an_endpoint_in_a_clients_zone_is_told_so() -> None:
    advice = [_advice("shop/api", crossing=30.0, after=30.0, missing=("zone-c",))]
    [said] = routing_actions(advice, _snapshot(_service("api")), _policy(), 0, NONE).announcements
    assert said.reason == NO_ENDPOINT
    assert said.message.startswith("calls from zone-c cross zones whatever the routing")


def test_nothing_is_said_of_a_service_routing_would_not_help() -> None:
    advice = [_advice("shop/api", crossing=30.0, after=30.0)]
    actions = routing_actions(advice, _snapshot(_service("api")), _policy(APPLY), 0, NONE)
    assert (actions.announcements, actions.changes) == ((), ())


@pytest.mark.parametrize("mode", ["evict", "migrate", "dry-run"])
def test_an_opted_in_service_is_changed_at_the_version_read(mode: str) -> None:
    snapshot = _snapshot(_service("api", **OPTED_IN), _service("web"))
    advice = [_advice("shop/api"), _advice("shop/web")]
    actions = routing_actions(advice, snapshot, _policy(APPLY, mode), 0, NONE)
    [change] = actions.changes
    assert (change.service, change.distribution, change.resource_version) == (
        "shop/api",
        "PreferSameZone",
        "rv-api",
    )
    [said] = actions.announcements
    assert said.service == "shop/web"
    assert f"annotate {ROUTING_ANNOTATION}=apply" in said.message


def test_a_change_not_made_waits_as_long_as_an_event_and_a_conflict_does_not() -> None:
    snapshot, advice = _snapshot(_service("api", **OPTED_IN)), [_advice("shop/api")]
    dry_run = _policy(APPLY, "dry-run")
    first = routing_actions(advice, snapshot, dry_run, 0, NONE)
    [change] = first.changes
    assert routing_actions(advice, snapshot, dry_run, 60, first.memory).changes == ()
    assert len(routing_actions(advice, snapshot, dry_run, HOUR, first.memory).changes) == 1
    acting = _policy(APPLY)
    made = routing_actions(advice, snapshot, acting, 0, NONE)
    assert made.memory == NONE  # a conflict leaves it so: the next cycle tries again
    refused = made.memory.tried(change, 0)
    assert routing_actions(advice, snapshot, acting, 60, refused).changes == ()
    assert len(routing_actions(advice, snapshot, acting, HOUR, refused).changes) == 1


def test_a_change_undone_by_someone_else_is_not_made_again_and_said_once() -> None:
    policy = _policy(APPLY)
    advice = [_advice("shop/api")]
    first = routing_actions(advice, _snapshot(_service("api", **OPTED_IN)), policy, 0, NONE)
    memory = first.memory.made(first.changes[0])
    # The watch has not caught up with the change: nothing to do, nothing to say.
    lagging = routing_actions(advice, _snapshot(_service("api", **OPTED_IN)), policy, 5, memory)
    assert (lagging.changes, lagging.announcements) == ((), ())
    reverted = replace(_service("api", **OPTED_IN), resource_version="rv-later")
    undone = routing_actions(advice, _snapshot(reverted), policy, 10, memory)
    assert undone.changes == ()
    [said] = undone.announcements
    assert (said.reason, said.warning) == (REVERTED, True)
    assert "something else owns the field" in said.message
    assert routing_actions(advice, _snapshot(reverted), policy, 20, undone.memory) == (
        RoutingActions((), (), undone.memory)
    )


@pytest.mark.parametrize(
    ("settings", "service", "said"),
    [
        ({}, _service("api", **OPTED_IN), "set it"),
        (APPLY, _service("api"), f"annotate {ROUTING_ANNOTATION}=apply"),
        (
            APPLY,
            _service("api", **OPTED_IN, **{"service.kubernetes.io/topology-mode": "Auto"}),
            "remove service.kubernetes.io/topology-mode, which overrides the field",
        ),
        (APPLY, _service("api", **{ROUTING_ANNOTATION: "keep"}), None),
        (APPLY, _service("api", "kube-system", **OPTED_IN), None),
        (
            {**APPLY, "scope": {"namespaces": {"include": ["other"]}}},
            _service("api", **OPTED_IN),
            None,
        ),
        (APPLY, _service("api", **OPTED_IN, **{"topology-rebalancer.io/exclude": "true"}), None),
    ],
    ids=["apply-off", "not-opted-in", "tar", "keep", "excluded", "not-included", "opted-out"],
)
def test_no_change_without_the_policy_and_the_services_own_consent(
    settings: dict[str, Any], service: Service, said: str | None
) -> None:
    advice = _advice(service.key)
    if "topology-mode" in str(service.annotations):
        advice = replace(advice, today="service.kubernetes.io/topology-mode=Auto")
    actions = routing_actions([advice], _snapshot(service), _policy(settings), 0, NONE)
    assert actions.changes == ()
    if said is None:  # out of scope or kept as it is: not a word
        assert actions.announcements == ()
    else:
        [announcement] = actions.announcements
        assert announcement.reason == RECOMMENDED
        assert said in announcement.message


def test_changes_and_events_per_cycle_are_capped_largest_saving_first() -> None:
    count = EVENTS_PER_CYCLE + 5
    services = [_service(f"s{i:02d}", **OPTED_IN) for i in range(count)]
    others = [_service(f"t{i:02d}") for i in range(count)]
    # Crossing grows with i, the saving falls with it: the order of the advice is not the one.
    advice = sorted(
        [_advice(s.key, 100.0 + i, 2.0 * i) for i, s in enumerate(services)]
        + [_advice(s.key, 100.0 + i, 2.0 * i) for i, s in enumerate(others)],
        key=lambda a: -a.crossing_today,
    )
    policy = _policy({"routing": {"apply": True, "changes_per_cycle": 3}})
    snapshot = _snapshot(*services, *others)
    first = routing_actions(advice, snapshot, policy, 0, NONE)
    assert [c.service for c in first.changes] == ["shop/s00", "shop/s01", "shop/s02"]
    assert len(first.announcements) == EVENTS_PER_CYCLE
    assert first.announcements[0].service == "shop/t00"
    rest = routing_actions(advice, snapshot, policy, 1, first.memory)
    assert {a.service for a in rest.announcements} == {f"shop/t{i:02d}" for i in range(20, 25)}


class Recording:
    """Stands in for CoreV1Api: answers each patch in turn as told, keeping what was sent."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    def patch_namespaced_service(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        self.sent.append({"name": name, "namespace": namespace, "body": body, **kw})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Answer:
    def __init__(self, distribution: str | None) -> None:
        spec = {} if distribution is None else {"trafficDistribution": distribution}
        self.data = json.dumps({"spec": spec}).encode()


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, bool, str]] = []

    def record(self, kind: str, namespace: str, name: str, **kw: Any) -> None:
        self.recorded.append((kind, name, kw["reason"], kw.get("warning", False), kw["message"]))


CHANGE = RoutingChange("shop/api", "PreferSameZone", "42", "set it")


def _client(answers: list[Any], dry_run: bool) -> tuple[RoutingClient, Recording, Events]:
    events, core = Events(), Recording(answers)
    routing = RoutingClient(client.ApiClient(), events, dry_run=dry_run)  # type: ignore[arg-type]
    routing.core = core  # type: ignore[assignment]
    return routing, core, events


@pytest.mark.parametrize(
    ("dry_run", "result", "reason"), [(False, "set", CHANGED), (True, "would-set", WOULD_CHANGE)]
)
def test_a_change_patches_the_field_alone_at_the_version_read(
    dry_run: bool, result: str, reason: str
) -> None:
    routing, core, events = _client([Answer("PreferSameZone")], dry_run)
    assert routing.change(CHANGE) == Changed(result, distribution="PreferSameZone")  # type: ignore[arg-type]
    [sent] = core.sent
    assert sent["body"] == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"trafficDistribution": "PreferSameZone"},
    }
    assert sent["dry_run"] == ("All" if dry_run else None)
    assert sent["_content_type"] == "application/merge-patch+json"
    [(kind, name, recorded, warned, message)] = events.recorded
    assert (kind, name, recorded, warned) == ("Service", "api", reason, False)
    verb = "would set" if dry_run else "set"
    assert message.startswith(f"{verb} spec.trafficDistribution: PreferSameZone")


def test_an_api_server_that_refuses_the_newer_name_gets_the_older_one() -> None:
    invalid = client.ApiException(status=422, reason="Unprocessable Entity")
    routing, core, _events = _client([invalid, Answer("PreferClose")], dry_run=False)
    assert routing.change(CHANGE) == Changed("set", distribution="PreferClose")
    assert [s["body"]["spec"]["trafficDistribution"] for s in core.sent] == [
        "PreferSameZone",
        "PreferClose",
    ]


def _invalid() -> client.ApiException:
    error = client.ApiException(status=422, reason="Unprocessable Entity")
    error.body = json.dumps({"message": 'Unsupported value: "PreferClose"'})
    return error


@pytest.mark.parametrize(
    ("answers", "result", "warned", "detail"),
    [
        ([client.ApiException(status=409, reason="Conflict")], "conflict", False, "changed"),
        (
            [client.ApiException(status=403, reason="Forbidden")],
            "refused",
            True,
            "deploy/components/routing",
        ),
        ([_invalid(), _invalid()], "not-kept", True, 'Unsupported value: "PreferClose"'),
        ([client.ApiException(status=500, reason="Boom")], "failed", True, "HTTP 500"),
        ([Answer(None)], "not-kept", True, "drops the field"),
        ([OSError("connection reset")], "failed", False, "connection reset"),
    ],
)
def test_a_change_not_made_is_said_and_not_retried_in_the_cycle(
    answers: list[Any], result: str, warned: bool, detail: str
) -> None:
    routing, core, events = _client(answers, dry_run=False)
    done = routing.change(CHANGE)
    assert (done.result, len(core.sent)) == (result, len(answers))
    assert detail in done.detail
    assert [(e[2], e[3]) for e in events.recorded] == ([(NOT_SET, True)] if warned else [])


def test_a_change_without_a_version_read_is_not_sent() -> None:
    routing, core, _events = _client([Answer("PreferSameZone")], dry_run=False)
    unversioned = RoutingChange("shop/api", "PreferSameZone", "", "set it")
    assert routing.change(unversioned).result == "failed"
    assert core.sent == []
