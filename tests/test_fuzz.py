"""Bad-input fuzzing: whatever a user, Prometheus or the API server hands over, the parsers either
accept it or give one clear line, never an exception that escapes and never a hang.

Each input space is searched two ways: arbitrary values, and small mutations of a valid input,
which reach the checks deep inside that random values almost never get past. The number of
examples is hypothesis' profile: `HYPOTHESIS_PROFILE=fuzz` searches far longer than the default.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import builders as b
from harness.faults import FAULTS, rewrite
from rebalancer.clients.kube_api import api_client
from rebalancer.clients.prometheus import PrometheusReader
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import decode_snapshot, parse_snapshot
from rebalancer.config.policy import Policy, load_policy, parse_policy
from rebalancer.errors import InputError
from rebalancer.planning.landing import Hint
from rebalancer.simulator.scenario import Scenario, parse_scenario
from rebalancer.traffic.answer import parse_answer
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import PodTraffic, TrafficFailure
from rebalancer.traffic.queries import build_queries
from rebalancer.traffic.settings import HubbleSource
from rebalancer.webhook.review import review_response
from tests.conftest import grid_nodes, pod_keys, zone_hint

EXAMPLES = Path(__file__).parents[1] / "examples"

settings.register_profile(
    "default",
    max_examples=150,
    deadline=5000,  # a hang guard, not a speed target: a slow example fails as a hang would
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz", max_examples=5000, deadline=5000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

QUERIES = build_queries(HubbleSource(source="hubble"))
OBJECTS = [
    *grid_nodes(),
    *b.deployment_pods("client", ["node-a11", "node-a12"]),
    *b.deployment_pods("server", ["node-b11", "node-b12"]),
]
SNAPSHOT = parse_snapshot(b.k8s_list(OBJECTS), "fuzz")
PODS = pod_keys(SNAPSHOT, "")
FRESH = parse_answer(b'{"status": "success", "data": {"resultType": "scalar", "result": [1, "5"]}}')

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)


def one_line(error: Exception) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message, message
    return message


def leaf_paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in a decoded JSON or YAML document, containers included."""
    paths = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            paths += leaf_paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            paths += leaf_paths(value, (*prefix, index))
    return paths


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    changed = copy.deepcopy(document)
    parent = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return changed


@st.composite
def mutations(draw: st.DrawFn, valid: Any) -> Any:
    """`valid` with one to three of its values (or containers) replaced by arbitrary ones."""
    document = valid
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(leaf_paths(document)))
        document = replaced(document, path, draw(json_values))
    return document


# --- the policy parser --------------------------------------------------------------------------

FULL_POLICY = Policy().model_dump(mode="json")


def check_policy(text: str) -> None:
    try:
        assert isinstance(parse_policy(text, "policy.yaml"), Policy)
    except InputError as error:
        assert one_line(error).startswith("policy.yaml:")


@given(st.text(max_size=300))
def test_any_text_is_a_policy_or_one_line(text: str) -> None:
    check_policy(text)


@given(mutations(FULL_POLICY))
def test_a_mutated_policy_is_a_policy_or_one_line_naming_the_field(document: Any) -> None:
    check_policy(yaml.safe_dump(document))


@given(
    st.sampled_from(
        ["interval_seconds", "cooldown", "mode", "traffic", "limits", "thresholds", "topology"]
    ),
    st.sampled_from(["2021-13-45", "!!python/object:os.system ls", "*missing", "&a [*a]", "{{"]),
)
def test_yaml_oddities_are_one_line(key: str, value: str) -> None:
    check_policy(f"{key}: {value}\n")


def test_a_billion_laughs_policy_is_refused_without_hanging() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    lines.append("scope: {namespaces: {include: *a8}}")
    with pytest.raises(InputError) as raised:
        parse_policy("\n".join(lines), "policy.yaml")
    assert one_line(raised.value).startswith("policy.yaml:")


# --- the Prometheus answer parser ---------------------------------------------------------------


def valid_answer() -> dict[str, Any]:
    result = []
    for index, (source, destination) in enumerate(zip(PODS, reversed(PODS), strict=True)):
        result.append(
            {
                "metric": {
                    "source_namespace": source.split("/")[0],
                    "source_pod": source.split("/")[1],
                    "destination_namespace": destination.split("/")[0],
                    "destination_pod": destination.split("/")[1],
                },
                "value": [1.7e9 + index, f"{index + 1.5}"],
            }
        )
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def check_answer(answer: Any) -> None:
    parsed = parse_answer(json.dumps(answer).encode(), QUERIES.labels)
    assert isinstance(parsed, list | TrafficFailure)
    traffic = read_traffic(parsed, FRESH, QUERIES, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic | TrafficFailure)
    if isinstance(traffic, TrafficFailure):
        assert traffic.detail and "\n" not in traffic.detail
    else:  # whatever is accepted is safe to plan on
        assert traffic.rates
        assert all(0 <= rate < float("inf") for rate in traffic.rates.values())
        assert all(a in SNAPSHOT.pods and b in SNAPSHOT.pods for a, b in traffic.rates)


def test_the_valid_answer_is_accepted() -> None:
    """Else the mutation tests below would only ever see failures."""
    assert isinstance(
        read_traffic(
            parse_answer(json.dumps(valid_answer()).encode(), QUERIES.labels),
            FRESH,
            QUERIES,
            SNAPSHOT,
            60,
        ),
        PodTraffic,
    )


@given(json_values)
def test_any_json_is_samples_or_a_named_failure(answer: Any) -> None:
    check_answer(answer)


@given(mutations(valid_answer()))
def test_a_mutated_answer_is_samples_or_a_named_failure(answer: Any) -> None:
    check_answer(answer)


@given(st.sampled_from(FAULTS))
def test_every_injected_fault_is_refused_or_harmless(fault: Any) -> None:
    promql = QUERIES.traffic
    check_answer(rewrite(fault, promql, valid_answer()))


# --- the HTTP edge ------------------------------------------------------------------------------


class CannedServer:
    """Answers every request with the status and body last set, as a broken server might."""

    def __init__(self) -> None:
        self.status, self.body = 200, b""
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(canned.status)
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedServer]:
    server = CannedServer()
    yield server
    server.server.shutdown()
    server.server.server_close()


bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    mutations(valid_answer()).map(lambda value: json.dumps(value).encode()),
    mutations(valid_answer()["data"]).map(
        lambda data: json.dumps({"status": "success", "data": data}).encode()
    ),
)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from([200, 200, 200, 204, 301, 400, 404, 422, 429, 500, 502, 503]), bodies)
def test_any_http_answer_is_samples_or_a_named_failure(
    canned: CannedServer, status: int, body: bytes
) -> None:
    canned.status, canned.body = status, body
    answer = PrometheusReader(canned.url, timeout_seconds=2).query(QUERIES.traffic, QUERIES.labels)
    assert isinstance(answer, list | TrafficFailure)
    if isinstance(answer, TrafficFailure):
        assert answer.detail and "\n" not in answer.detail
    traffic = read_traffic(answer, FRESH, QUERIES, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic | TrafficFailure)


# --- the snapshot parser ------------------------------------------------------------------------


CLUSTER = b.k8s_list(OBJECTS[:3] + OBJECTS[-2:])


@given(mutations(CLUSTER))
def test_a_mutated_cluster_list_is_a_snapshot_or_one_line(document: Any) -> None:
    try:
        assert isinstance(parse_snapshot(document, "cluster.json"), Snapshot)
    except InputError as error:
        assert one_line(error).startswith("cluster.json")


@given(
    st.one_of(
        st.binary(max_size=200),
        mutations(CLUSTER).map(lambda document: json.dumps(document).encode()),
        st.tuples(mutations(CLUSTER), st.floats(0, 1)).map(
            lambda cut: json.dumps(cut[0]).encode()[: int(len(json.dumps(cut[0])) * cut[1])]
        ),
    )
)
def test_any_bytes_are_a_snapshot_or_one_line(body: bytes) -> None:
    """A file's bytes take a typed decoder first, and an untyped one to name the fault."""
    try:
        assert isinstance(decode_snapshot(body, "cluster.json"), Snapshot)
    except InputError as error:
        assert one_line(error).startswith("cluster.json")


# --- quantities in a snapshot -------------------------------------------------------------------

quantities = st.one_of(
    st.from_regex(
        r"\A[-+]?[0-9]{0,6}(\.[0-9]{0,4})?([eE][-+]?[0-9]{1,6})?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|[EPTGM])?\Z"
    ),
    st.sampled_from(["Infinity", "-Infinity", "NaN", "1e400", "1e999999", "-1", "0x10", "1Qi", ""]),
    st.text(max_size=12),
)


@given(
    st.sampled_from(
        [("cpu", "request"), ("memory", "request"), ("cpu", "allocatable"), ("pods", "allocatable")]
    ),
    quantities,
)
def test_any_quantity_is_a_finite_count_or_one_line_naming_the_object(
    where: tuple[str, str], quantity: str
) -> None:
    """1e400 and Infinity raised an OverflowError; a negative request changed a plan."""
    resource, side = where
    given: dict[str, Any] = {resource: quantity}
    if side == "request":
        objects = [*grid_nodes(), *b.deployment_pods("web", ["node-a11"], **given)]
    else:
        objects = grid_nodes(**given)
    try:
        snapshot = parse_snapshot(b.k8s_list(objects), "cluster.json")
    except InputError as error:
        assert one_line(error).startswith("cluster.json: items[")
        return
    counts = [node.allocatable for node in snapshot.nodes.values()]
    counts += [pod.requests for pod in snapshot.pods.values()]
    for count in counts:
        values = [count.cpu_millis, count.memory_bytes, count.pods]
        values += [amount for _name, amount in count.scalars]
        assert all(0 <= value < 1e30 for value in values)


# --- admission reviews --------------------------------------------------------------------------


class EveryOwnerHinted:
    """A hint for any owner, so a review that gets that far is patched: the deepest path."""

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        return zone_hint(owner, "a", now, required=True)


FULL_REVIEW = b.admission_review(
    kind={"group": "", "version": "v1", "kind": "Pod"},
    dryRun=False,
    pod_spec={"containers": [{"name": "main"}], "affinity": {"podAntiAffinity": {}}},
)


def check_review(review: Any) -> None:
    answer = review_response(review, EveryOwnerHinted(), lambda: 1000.0)
    assert (answer["apiVersion"], answer["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = answer["response"]
    assert response["allowed"] is True and isinstance(response["uid"], str)
    if "patch" in response:
        assert response["patchType"] == "JSONPatch" and response["uid"]
        patch = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(patch, list) and all(op["op"] in {"add", "replace"} for op in patch)
    json.dumps(answer)  # what the server writes


def test_the_full_review_is_patched() -> None:
    answer = review_response(FULL_REVIEW, EveryOwnerHinted(), lambda: 1000.0)
    assert "patch" in answer["response"]


@given(json_values)
def test_any_json_is_answered_allowed(review: Any) -> None:
    check_review(review)


@given(mutations(FULL_REVIEW))
def test_a_mutated_review_is_answered_allowed_and_any_patch_is_well_formed(review: Any) -> None:
    check_review(review)


# --- scenarios, policy files and kubeconfigs ----------------------------------------------------

DEMO_SCENARIO = yaml.safe_load((EXAMPLES / "scenarios" / "demo.yaml").read_text())


@given(mutations(DEMO_SCENARIO))
def test_a_mutated_scenario_is_a_scenario_or_one_line(document: Any) -> None:
    try:
        assert isinstance(parse_scenario(yaml.safe_dump(document), "s.yaml"), Scenario)
    except InputError as error:
        assert one_line(error).startswith("s.yaml")


@given(
    st.one_of(
        st.binary(max_size=200),
        st.text(max_size=100).map(lambda text: text.encode("utf-16")),
        st.text(max_size=100).map(lambda text: ("\ufeff" + text).encode("utf-8")),
    )
)
def test_any_policy_file_is_a_policy_or_one_line(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.yaml"
        path.write_bytes(body)
        try:
            assert isinstance(load_policy(path), Policy)
        except InputError as error:
            assert one_line(error).startswith(str(path))


KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


@given(mutations(KUBECONFIG))
def test_a_mutated_kubeconfig_is_a_client_or_one_line(document: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kubeconfig"
        path.write_text(yaml.safe_dump(document))
        try:
            api_client(str(path)).close()  # type: ignore[no-untyped-call]
        except InputError as error:
            assert one_line(error).startswith(str(path))
