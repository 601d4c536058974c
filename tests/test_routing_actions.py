"""What a cycle says and does about routing: Events due, at most so often; changes only where the
policy and the Service's own annotation allow; and the client that makes them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from rebalancer.clients.routing import NOT_SET, RoutingClient
from rebalancer.cluster.model import Service, Snapshot
from rebalancer.config.policy import Policy
from rebalancer.cost.routing import ROUTING_ANNOTATION, RoutingAdvice
from rebalancer.planning.routing import (
    CHANGED,
    EVENTS_PER_CYCLE,
    NO_ENDPOINT,
    RECOMMENDED,
    WOULD_CHANGE,
    RoutingChange,
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


def test_a_recommendation_is_said_once_an_hour_and_again_at_once_when_it_changes() -> None:
    snapshot, advice = _snapshot(_service("api")), [_advice("shop/api")]
    first = routing_actions(advice, snapshot, _policy(), 0.0, {})
    [said] = first.announcements
    assert (said.service, said.reason, first.changes) == ("shop/api", RECOMMENDED, ())
    assert "PreferSameZone would keep 50 of the 60 crossing zones" in said.message
    assert "12.50 USD/month" in said.message
    later = routing_actions(advice, snapshot, _policy(), HOUR - 1, first.announced)
    assert later.announcements == ()
    # The figures of a later cycle differ; the Event waits all the same.
    moved = routing_actions([_advice("shop/api", 70.0)], snapshot, _policy(), 10, first.announced)
    assert moved.announcements == ()
    again = routing_actions(advice, snapshot, _policy(), HOUR, later.announced)
    assert [a.reason for a in again.announcements] == [RECOMMENDED]
    changed = [_advice("shop/api", missing=("c",))]
    now_missing = routing_actions(changed, snapshot, _policy(), 20, first.announced)
    assert "no ready endpoint in c" in now_missing.announcements[0].message


def test_a_service_without_an_endpoint_in_a_clients_zone_is_told_so() -> None:
    advice = [_advice("shop/api", crossing=30.0, after=30.0, missing=("zone-c",))]
    [said] = routing_actions(advice, _snapshot(_service("api")), _policy(), 0, {}).announcements
    assert said.reason == NO_ENDPOINT
    assert said.message.startswith("calls from zone-c cross zones whatever the routing")


def test_nothing_is_said_of_a_service_routing_would_not_help() -> None:
    advice = [_advice("shop/api", crossing=30.0, after=30.0)]
    actions = routing_actions(advice, _snapshot(_service("api")), _policy(APPLY), 0, {})
    assert (actions.announcements, actions.changes) == ((), ())


@pytest.mark.parametrize("mode", ["evict", "migrate", "dry-run"])
def test_an_opted_in_service_is_changed_at_the_version_read(mode: str) -> None:
    snapshot = _snapshot(_service("api", **OPTED_IN), _service("web"))
    advice = [_advice("shop/api"), _advice("shop/web")]
    actions = routing_actions(advice, snapshot, _policy(APPLY, mode), 0, {})
    [change] = actions.changes
    assert (change.service, change.distribution, change.resource_version) == (
        "shop/api",
        "PreferSameZone",
        "rv-api",
    )
    [said] = actions.announcements
    assert said.service == "shop/web"
    assert f"annotate {ROUTING_ANNOTATION}=apply" in said.message


def test_a_dry_run_change_is_repeated_no_more_often_than_an_event() -> None:
    snapshot, advice = _snapshot(_service("api", **OPTED_IN)), [_advice("shop/api")]
    policy = _policy(APPLY, "dry-run")
    first = routing_actions(advice, snapshot, policy, 0, {})
    assert len(first.changes) == 1
    assert routing_actions(advice, snapshot, policy, 60, first.announced).changes == ()
    assert len(routing_actions(advice, snapshot, policy, HOUR, first.announced).changes) == 1
    # A real change is made every cycle it is still due: a conflict is retried next cycle.
    acting = _policy(APPLY)
    assert len(routing_actions(advice, snapshot, acting, 60, first.announced).changes) == 1


@pytest.mark.parametrize(
    ("settings", "service"),
    [
        ({}, _service("api", **OPTED_IN)),
        (APPLY, _service("api")),
        (APPLY, _service("api", **{ROUTING_ANNOTATION: "keep"})),
        (APPLY, _service("api", "kube-system", **OPTED_IN)),
        ({**APPLY, "scope": {"namespaces": {"include": ["other"]}}}, _service("api", **OPTED_IN)),
        (APPLY, _service("api", **OPTED_IN, **{"topology-rebalancer.io/exclude": "true"})),
        (APPLY, _service("api", **OPTED_IN, **{"service.kubernetes.io/topology-mode": "Auto"})),
    ],
    ids=["apply-off", "not-opted-in", "keep", "excluded", "not-included", "opted-out", "tar"],
)
def test_no_change_without_the_policy_and_the_services_own_consent(
    settings: dict[str, Any], service: Service
) -> None:
    actions = routing_actions([_advice(service.key)], _snapshot(service), _policy(settings), 0, {})
    assert actions.changes == ()
    assert [a.reason for a in actions.announcements] == [RECOMMENDED]


def test_changes_and_events_per_cycle_are_capped_heaviest_first() -> None:
    count = EVENTS_PER_CYCLE + 5
    services = [_service(f"s{i:02d}", **OPTED_IN) for i in range(count)]
    others = [_service(f"t{i:02d}") for i in range(count)]
    advice = sorted(
        [_advice(s.key, crossing=100.0 + i) for i, s in enumerate(services)]
        + [_advice(s.key, crossing=100.0 + i) for i, s in enumerate(others)],
        key=lambda a: -a.crossing_today,
    )
    policy = _policy({"routing": {"apply": True, "changes_per_cycle": 3}})
    first = routing_actions(advice, _snapshot(*services, *others), policy, 0, {})
    assert [c.service for c in first.changes] == ["shop/s24", "shop/s23", "shop/s22"]
    assert len(first.announcements) == EVENTS_PER_CYCLE
    assert first.announcements[0].service == "shop/t24"
    rest = routing_actions(advice, _snapshot(*services, *others), policy, 1, first.announced)
    assert {a.service for a in rest.announcements} == {f"shop/t{i:02d}" for i in range(5)}


class Recording:
    """Stands in for CoreV1Api: answers each patch as told, keeping what was sent."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def patch_namespaced_service(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        self.sent.append({"name": name, "namespace": namespace, "body": body, **kw})
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Answer:
    def __init__(self, distribution: str | None) -> None:
        spec = {} if distribution is None else {"trafficDistribution": distribution}
        self.data = json.dumps({"spec": spec}).encode()


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, bool]] = []

    def record(self, kind: str, namespace: str, name: str, **kw: Any) -> None:
        self.recorded.append((kind, name, kw["reason"], kw.get("warning", False)))


CHANGE = RoutingChange("shop/api", "PreferSameZone", "42", "set it")


def _client(answer: Any, dry_run: bool) -> tuple[RoutingClient, Recording, Events]:
    events, core = Events(), Recording(answer)
    routing = RoutingClient(client.ApiClient(), events, dry_run=dry_run)  # type: ignore[arg-type]
    routing.core = core  # type: ignore[assignment]
    return routing, core, events


@pytest.mark.parametrize(
    ("dry_run", "result", "reason"), [(False, "set", CHANGED), (True, "would-set", WOULD_CHANGE)]
)
def test_a_change_patches_the_field_alone_at_the_version_read(
    dry_run: bool, result: str, reason: str
) -> None:
    routing, core, events = _client(Answer("PreferSameZone"), dry_run)
    assert routing.change(CHANGE).result == result
    [sent] = core.sent
    assert sent["body"] == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"trafficDistribution": "PreferSameZone"},
    }
    assert sent["dry_run"] == ("All" if dry_run else None)
    assert sent["_content_type"] == "application/merge-patch+json"
    assert events.recorded == [("Service", "api", reason, False)]


@pytest.mark.parametrize(
    ("answer", "result", "warned"),
    [
        (client.ApiException(status=409, reason="Conflict"), "conflict", False),
        (client.ApiException(status=403, reason="Forbidden"), "refused", True),
        (client.ApiException(status=422, reason="Invalid"), "failed", True),
        (Answer(None), "not-kept", True),
        (OSError("reset"), "failed", False),
    ],
)
def test_a_change_not_made_is_said_and_nothing_is_retried_in_the_cycle(
    answer: Any, result: str, warned: bool
) -> None:
    routing, core, events = _client(answer, dry_run=False)
    assert routing.change(CHANGE).result == result
    assert len(core.sent) == 1
    assert events.recorded == ([("Service", "api", NOT_SET, True)] if warned else [])


def test_a_change_without_a_version_read_is_not_sent() -> None:
    routing, core, _events = _client(Answer("PreferSameZone"), dry_run=False)
    unversioned = RoutingChange("shop/api", "PreferSameZone", "", "set it")
    assert routing.change(unversioned).result == "failed"
    assert core.sent == []
