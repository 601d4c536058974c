"""`rebalancer plan` and its exit codes: 0 with a plan, 2 for bad input, 3 without data."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness import builders as b
from harness.process import free_port
from rebalancer.cli import main
from rebalancer.cli.parser import build_parser
from rebalancer.errors import InputError
from rebalancer.files import read_bytes, read_text

DEMO = Path(__file__).parent.parent / "examples" / "demo"
DEMO_ARGS = [
    "plan",
    "--policy",
    str(DEMO / "policy.yaml"),
    "--snapshot",
    str(DEMO / "snapshot.json"),
    "--traffic",
    str(DEMO / "traffic.json"),
]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json_has_moves_skips_and_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run([*DEMO_ARGS, "--output", "json"], capsys)
    assert code == 0
    document = json.loads(out)
    assert document["moves"], document["skipped"]
    move = document["moves"][0]
    assert set(move) >= {"pod", "workload", "from", "to", "gain", "strategy"}
    assert "/" in move["pod"] and set(move["to"]) <= {"zone", "rack", "host"}
    assert {s["pod"] for s in document["skipped"]} >= {"payments/ledger-5d8c7-00001"}
    figures = document["figures"]
    assert set(figures["crossing"]) == {"zone", "rack", "host"}
    assert document["predicted"]["weighted_cost"] < figures["weighted_cost"]
    moved = {m["pod"].split("/")[0] for m in document["moves"]}
    assert {"shop", "ml"} <= moved <= {"shop", "ml", "payments"}  # never the agent
    # The ledger may move nearer the frontends that call it, never out of its zone.
    ledger = [m for m in document["moves"] if m["pod"].startswith("payments/")]
    assert all(m["from"]["zone"] == m["to"]["zone"] for m in ledger)


def test_plan_table_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(DEMO_ARGS, capsys)
    assert code == 0
    assert "moves (" in out and "skipped:" in out and "crossing zone" in out


def test_state_file_gates_moves_until_they_persist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.json"
    for cycle in range(3):
        code, out, _err = run([*DEMO_ARGS, "--output", "json", "--state", str(state)], capsys)
        assert code == 0
        moves = json.loads(out)["moves"]
        assert bool(moves) == (cycle == 2)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("limits: {per_cycle: -3}", "limits.per_cycle: Input should be greater than or equal to 0"),
        ("strategies: [{name: nope}]", "strategies.0.name: unknown strategy 'nope'"),
        (
            "traffic: {source: custom, query: 'rate(x[5m]', freshness_query: 'x'}",
            "traffic.query: invalid PromQL",
        ),
        ("mode: 3", "mode: Input should be 'dry-run', 'evict' or 'migrate'"),
        ("interval_seconds: [1]", "interval_seconds: Input should be a valid number"),
    ],
    ids=["negative-limit", "unknown-strategy", "bad-promql", "wrong-type", "wrong-type-list"],
)
def test_bad_policy_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    code, out, err = run(["plan", "--policy", str(path), *DEMO_ARGS[3:]], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"rebalancer: {path}: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("replace", "content", "message"),
    [
        ("--snapshot", None, "cannot read snapshot"),
        ("--snapshot", "[1, 2", "not valid JSON"),
        ("--snapshot", '{"kind": "Pod"}', "not a Kubernetes List"),
        ("--traffic", None, "cannot read traffic file"),
        ("--traffic", '{"status": "success"}', "not a Prometheus query response"),
        ("--policy", None, "cannot read policy"),
    ],
    ids=[
        "missing-snapshot",
        "malformed-snapshot",
        "not-a-list",
        "missing-traffic",
        "malformed-traffic",
        "missing-policy",
    ],
)
def test_bad_files_exit_2_naming_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    replace: str,
    content: str | None,
    message: str,
) -> None:
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    args = list(DEMO_ARGS)
    args[args.index(replace) + 1] = str(path)
    code, _out, err = run(args, capsys)
    assert code == 2
    assert err.startswith(f"rebalancer: {path}: ") and message in err
    assert err.count("\n") == 1


def test_a_readiness_threshold_below_one_exits_2_before_reaching_the_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["run", "--prometheus", "http://127.0.0.1:1", "--policy", str(DEMO / "policy.yaml")]
    args += ["--state-configmap", "ops/state", "--unready-after", "0"]
    code, _out, err = run(args, capsys)
    assert code == 2
    assert err == "rebalancer: run: --unready-after must be at least 1, got 0\n"


def test_conflicting_sources_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run([*DEMO_ARGS, "--prometheus", "http://127.0.0.1:1"], capsys)
    assert code == 2 and "either --traffic FILE or --prometheus URL" in err


def test_unreachable_prometheus_exits_3_and_plans_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run(
        [
            "plan",
            "--snapshot",
            str(DEMO / "snapshot.json"),
            "--prometheus",
            url,
            "--output",
            "json",
        ],
        capsys,
    )
    assert code == 3
    assert json.loads(out)["moves"] == []
    assert json.loads(out)["error"]["reason"] == "unreachable"
    assert "no moves: traffic unreachable" in err


def _traffic_with_invalid_utf8() -> bytes:
    body = (DEMO / "traffic.json").read_bytes()
    at = body.index(b'"source_pod"') + len(b'"source_pod": "')
    return body[:at] + b"\xff\xfe" + body[at:]


SCALAR = b'{"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}'
DEEP = b'{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p", "annotations": '
DEEP += b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}}]}"


@pytest.mark.parametrize(
    ("flag", "content", "message"),
    [
        ("--policy", "\ufeffmode: evict\n".encode("utf-16"), "cannot read policy (not UTF-8 text"),
        ("--traffic", SCALAR, "not a Prometheus query response (expected a vector, got scalar)"),
        ("--traffic", _traffic_with_invalid_utf8(), "data.result: Invalid UTF-8"),
        ("--snapshot", DEEP, "not valid JSON (nested too deeply)"),
        ("--kubeconfig", b"garbage: [\n", "cannot load Kubernetes config"),
    ],
    ids=[
        "utf-16-policy",
        "scalar-traffic",
        "invalid-utf8-label",
        "deep-snapshot",
        "bad-kubeconfig",
    ],
)
def test_inputs_that_raised_tracebacks_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: bytes, message: str
) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    args = list(DEMO_ARGS)
    if flag == "--kubeconfig":
        args[args.index("--snapshot") : args.index("--snapshot") + 2] = [flag, str(path)]
    else:
        args[args.index(flag) + 1] = str(path)
    code, _out, err = run(args, capsys)
    assert code == 2
    assert err.startswith(f"rebalancer: {path}: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        [*DEMO_ARGS, "--state", "{missing}/state.json"],
        [
            "simulate",
            str(DEMO.parent / "scenarios" / "chatty-pair.yaml"),
            "--plot",
            "{missing}/p.png",
        ],
    ],
    ids=["state", "plot"],
)
def test_outputs_into_a_missing_folder_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    missing = tmp_path / "absent"
    code, _out, err = run([arg.format(missing=missing) for arg in args], capsys)
    assert code == 2
    assert err.startswith(f"rebalancer: {missing}/") and err.count("\n") == 1


def _kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


@pytest.mark.parametrize("answer", ["refused", "silent"])
def test_run_once_without_an_api_server_exits_3_with_one_line(tmp_path: Path, answer: str) -> None:
    """It kept retrying past 90 s and printed 234 warning lines: its watch cache retried for ever,
    urllib3 logged each retry, and a silent server was waited on without a deadline."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        if answer == "silent":
            server.listen(64)  # accepts, never answers: a hung API server
        port = server.getsockname()[1]
        if answer == "refused":
            server.close()
        command = [sys.executable, "-m", "rebalancer.cli", "run", "--once", "--metrics-port", "0"]
        command += ["--kubeconfig", str(_kubeconfig(tmp_path / "kubeconfig", port))]
        command += ["--prometheus", f"http://127.0.0.1:{free_port()}"]
        command += ["--policy", str(DEMO / "policy.yaml"), "--state-configmap", "ops/state"]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 3, done.stderr
    last = done.stderr.splitlines()[-1]
    # A cycle reads its state first (surges under way are taken a step further before anything
    # else), so that is the source named.
    assert last.startswith("rebalancer: cycle error: state ConfigMap: "), last
    assert f"port={port}" in last
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) <= 4  # start, metrics port, the cycle, the end


def test_the_built_in_policy_plans_on_nodes_without_a_region(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The demo's nodes have zone and host labels and no region, as on kind and k3s: the
    built-in levels (region, zone, host) printed 12 warnings and planned no move."""
    args = ["plan", "--snapshot", str(DEMO / "snapshot.json"), "--traffic"]
    code, out, _err = run([*args, str(DEMO / "traffic.json")], capsys)
    assert code == 0
    assert "warning" not in out
    assert out.startswith("note: no node carries topology.kubernetes.io/region, so level region")
    assert "shop/cart-5d8c7-00000" in out.split("moves (")[1].split("skipped")[0]
    code, out, _err = run([*args, str(DEMO / "traffic.json"), "--output", "json"], capsys)
    plan = json.loads(out)
    assert plan["levels_not_in_force"] == ["region"] and plan["nodes_missing_labels"] == {}
    assert plan["moves"] and all(move["to"].keys() == {"zone"} for move in plan["moves"])


def test_topology_shows_the_levels_in_force_and_what_each_covers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["topology", "--snapshot", str(DEMO / "snapshot.json")]
    code, out, _err = run(args, capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["level", "label", "nodes", "domains", "in", "force"]
    assert lines[1].split()[:4] == ["region", "topology.kubernetes.io/region", "12", "1"]
    assert lines[1].endswith("no: no node carries the label")
    assert [line.split()[0] for line in lines[2:5]] == ["zone", "rack", "host"]
    assert [line.split()[3] for line in lines[2:5]] == ["3", "6", "12"]
    code, out, _err = run([*args, "--output", "json"], capsys)
    levels = json.loads(out)["levels"]
    assert [(level["name"], level["in_force"]) for level in levels] == [
        ("region", False),
        ("zone", True),
        ("rack", True),
        ("host", True),
    ]


def test_every_flag_of_every_command_has_help() -> None:
    parser = build_parser()
    commands = [parser]
    while commands:
        command = commands.pop()
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands.extend(action.choices.values())
            elif not isinstance(action, argparse._HelpAction):
                flag = "/".join(action.option_strings) or action.dest
                assert action.help, f"{command.prog} {flag}"


def test_version_and_policy_checks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("rebalancer ")
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: topology-rebalancer.io/v1alpha1\nkind: RebalancerPolicy\n")
    code, out, _err = run(["policy", "validate", str(policy)], capsys)
    assert code == 0 and out.startswith(f"{policy}: a valid policy (mode dry-run;")
    policy.write_text("apiVersion: topology-rebalancer.io/v2\n")
    code, _out, err = run(["policy", "validate", str(policy)], capsys)
    assert code == 2
    assert err == (
        f"rebalancer: {policy}: apiVersion: expected 'topology-rebalancer.io/v1alpha1',"
        " got 'topology-rebalancer.io/v2'\n"
    )
    code, out, _err = run(["policy", "schema"], capsys)
    schema = json.loads(out)
    assert code == 0 and schema["properties"]["kind"] == {"const": "RebalancerPolicy"}
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["policy", "validate", "/dev/zero"], "/dev/zero: a policy is at most 1 MiB; this is more"),
        (["simulate", "/dev/zero"], "/dev/zero: a scenario is at most 16 MiB; this is more"),
    ],
    ids=["policy", "scenario"],
)
def test_a_device_given_as_a_file_is_refused_at_its_limit(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero has no size: checked by the file's size, it was read until memory ran out."""
    code, _out, err = run(args, capsys)
    assert code == 2 and err == f"rebalancer: {message}\n"


def test_every_input_file_is_read_to_its_limit_only(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a snapshot is at most 1000 bytes; this is more"):
        read_bytes(Path("/dev/zero"), "snapshot", 1000)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"mode: \xe9vict\n")
    with pytest.raises(InputError, match="not UTF-8 text: byte 6"):
        read_text(latin, "policy", 1000)


ESCAPE = "\x1b]0;owned\x07\x1b[2J"


def test_escape_sequences_from_the_cluster_reach_no_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zone label or node name holding an escape sequence (a handmade or hostile snapshot)
    is printed escaped by `plan` and `topology`, in tables and in errors alike."""
    nodes = [b.node(f"n-a{ESCAPE}", f"a{ESCAPE}", "r1"), b.node("n-b", "b", "r1")]
    objects = [
        *nodes,
        *b.deployment_pods("client", [f"n-a{ESCAPE}"] * 2),
        *b.deployment_pods("server", ["n-b"] * 2),
    ]
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(b.k8s_list(objects)))
    keys = [f"default/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod"]
    rates = {(a, z): 10.0 for a in keys[:2] for z in keys[2:]}
    traffic = tmp_path / "traffic.json"
    traffic.write_text(json.dumps(b.hubble_vector(rates)))
    policy = tmp_path / "policy.yaml"
    policy.write_text("persistence: {cycles: 1}\n")
    for args in (
        ["plan", "--policy", str(policy), "--snapshot", str(snapshot), "--traffic", str(traffic)],
        ["topology", "--snapshot", str(snapshot)],
        ["plan", "--snapshot", str(snapshot), "--traffic", str(tmp_path / f"gone{ESCAPE}")],
    ):
        _code, out, err = run(args, capsys)
        assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b" in err  # the missing file's name, escaped


def test_a_saved_answer_with_a_pair_twice_is_its_file_s_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 naming the file: a saved answer is the user's to fix (a live one fails the
    cycle's traffic instead, exit 3, as a source that may heal)."""
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    answer = json.loads((demo / "traffic.json").read_text())
    answer["data"]["result"].append(answer["data"]["result"][0])
    traffic = tmp_path / "traffic.json"
    traffic.write_text(json.dumps(answer))
    code, _out, err = run(
        ["plan", "--snapshot", str(demo / "snapshot.json"), "--traffic", str(traffic)], capsys
    )
    assert (code, err) == (2, f"rebalancer: {traffic}: 1 duplicate series for the same pair\n")
