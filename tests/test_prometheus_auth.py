"""Secured Prometheus back ends, each a real Prometheus: basic auth and TLS with a client
certificate through its own --web.config.file, a bearer token and a tenant header behind a
gateway that checks them (as Mimir's or a managed service's does) under a path prefix. Each
plans the split pair with the right flags, and exits 3 without them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import requests

from harness import builders as b
from harness.certificates import Pki, make_pki
from harness.exporter import HUBBLE_FLOWS, FlowCounters, serve
from harness.prometheus import PrometheusServer
from rebalancer.cli import main
from tests.conftest import LIVE_POLICY_YAML, all_pairs, grid_nodes, pod_keys, snapshot_of

pytestmark = pytest.mark.integration

OBJECTS = [
    *grid_nodes(),
    *b.deployment_pods("client", ["node-a11", "node-a12"]),
    *b.deployment_pods("server", ["node-b11", "node-b12"]),
]
PASSWORD = "not-a-real-secret"
TENANT = "team-a"


@dataclass
class Files:
    workdir: Path
    policy: Path
    snapshot: Path
    pki: Pki
    exporter: str

    def secret(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text + "\n")
        return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Files]:
    workdir = tmp_path_factory.mktemp("prometheus-auth")
    snapshot = snapshot_of(OBJECTS)
    rates = all_pairs(pod_keys(snapshot, "client"), pod_keys(snapshot, "server"), 20.0)
    (workdir / "snapshot.json").write_text(json.dumps(b.k8s_list(OBJECTS)))
    (workdir / "policy.yaml").write_text(LIVE_POLICY_YAML)
    with serve(FlowCounters(lambda: rates, HUBBLE_FLOWS)) as target:
        yield Files(
            workdir,
            workdir / "policy.yaml",
            workdir / "snapshot.json",
            make_pki(workdir / "pki"),
            target,
        )


def running(files: Files, name: str, web: dict[str, Any], session: requests.Session) -> Any:
    server = PrometheusServer(
        files.workdir / name, [files.exporter], web_config=web, session=session
    )
    try:
        server.wait_ready()
        server.wait_for(f"count_over_time({HUBBLE_FLOWS.name}_total[10s]) >= 10", 4)
    except BaseException:
        server.stop()  # a server that never got ready is still running
        raise
    return server


def plan(
    files: Files, url: str, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, Any]:
    args = ["plan", "--policy", str(files.policy), "--snapshot", str(files.snapshot)]
    code = main([*args, "--prometheus", url, "--output", "json", *flags])
    return code, json.loads(capsys.readouterr().out)


def planned(code: int, document: Any) -> bool:
    return code == 0 and bool(document["moves"])


def test_basic_auth(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    session = requests.Session()
    session.auth = ("rebalancer", PASSWORD)
    server = running(files, "basic", {"basic_auth_users": {"rebalancer": hashed}}, session)
    try:
        password = files.secret("password", PASSWORD)
        user = ["--prometheus-username", "rebalancer"]
        assert planned(
            *plan(files, server.url, capsys, *user, "--prometheus-password-file", str(password))
        )
        code, document = plan(files, server.url, capsys)
        assert code == 3 and "answered HTTP 401" in document["error"]["detail"]
    finally:
        server.stop()


def test_tls_with_a_client_certificate(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    pki = files.pki
    web = {
        "tls_server_config": {
            "cert_file": str(pki.server_cert),
            "key_file": str(pki.server_key),
            "client_auth_type": "RequireAndVerifyClientCert",
            "client_ca_file": str(pki.ca_cert),
        }
    }
    session = requests.Session()
    session.verify, session.cert = str(pki.ca_cert), (str(pki.admin_cert), str(pki.admin_key))
    server = running(files, "mtls", web, session)
    try:
        trust = ["--prometheus-ca-file", str(pki.ca_cert)]
        client = [
            "--prometheus-cert-file",
            str(pki.admin_cert),
            "--prometheus-key-file",
            str(pki.admin_key),
        ]
        assert server.url.startswith("https://")
        assert planned(*plan(files, server.url, capsys, *trust, *client))
        code, document = plan(files, server.url, capsys, *trust)  # no client certificate
        assert code == 3 and document["error"]["reason"] == "unreachable"
        code, document = plan(files, server.url, capsys, *client)  # the system CAs: untrusted
        assert code == 3 and document["error"]["reason"] == "unreachable"
    finally:
        server.stop()


@dataclass
class Gateway:
    """In front of a Prometheus under /prometheus, answering 401 unless the request carries
    the current token and the tenant header; it keeps the headers it saw."""

    upstream: str
    token: str
    seen: list[dict[str, str]] = field(default_factory=list)

    def serve(self) -> ThreadingHTTPServer:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                gateway.seen.append(dict(self.headers))
                allowed = (
                    self.path.startswith("/prometheus/")
                    and self.headers.get("Authorization") == f"Bearer {gateway.token}"
                    and self.headers.get("X-Scope-OrgID") == TENANT
                )
                if not allowed:
                    body, status = b'{"status":"error","error":"unauthorized"}', 401
                else:
                    path = self.path.removeprefix("/prometheus")
                    answer = requests.get(f"{gateway.upstream}{path}", timeout=10)
                    body, status = answer.content, answer.status_code
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def test_a_rotated_bearer_token_and_a_tenant_header_under_a_path_prefix(
    files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    server = running(files, "gateway", {}, requests.Session())
    gateway = Gateway(server.url, "first-token")
    http = gateway.serve()
    try:
        url = f"http://127.0.0.1:{http.server_port}/prometheus"
        token = files.secret("token", "first-token")
        flags = [
            "--prometheus-bearer-token-file",
            str(token),
            "--prometheus-header",
            f"X-Scope-OrgID: {TENANT}",
        ]
        assert planned(*plan(files, url, capsys, *flags))
        assert gateway.seen[-1]["X-Scope-OrgID"] == TENANT
        gateway.token = "second-token"  # rotated at the gateway first: refused until the file is
        code, document = plan(files, url, capsys, *flags)
        assert code == 3 and "answered HTTP 401" in document["error"]["detail"]
        token.write_text("second-token\n")
        assert planned(*plan(files, url, capsys, *flags))
        code, document = plan(files, url, capsys, "--prometheus-bearer-token-file", str(token))
        assert code == 3  # no tenant header
    finally:
        http.shutdown()
        server.stop()


def test_access_flags_that_cannot_work_exit_2_naming_the_flag(
    files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:1"
    for flags, message in [
        (["--prometheus-username", "u"], "basic auth needs both --prometheus-username"),
        (["--prometheus-ca-file", str(files.workdir / "missing.pem")], "--prometheus-ca-file: "),
        (
            ["--prometheus-header", "no colon"],
            "--prometheus-header (number 1): expected NAME:VALUE",
        ),
    ]:
        args = ["plan", "--snapshot", str(files.snapshot), "--prometheus", url, *flags]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("rebalancer: ") and message in err and err.count("\n") == 1
