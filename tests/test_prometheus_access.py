"""Credentials and headers that cannot work are refused before the first query, exit 2, with
one line naming the flag or file and never the secret; a credential rotated into one that
cannot work makes a cycle's traffic a named failure, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalancer.cli import main
from rebalancer.clients.prometheus import MAX_SECRET_BYTES, PrometheusAccess, PrometheusReader
from rebalancer.traffic.model import TrafficFailure

SECRET = "s3cret-token"
DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"

BAD_FILES = {
    "not-utf-8": (b"\xff\xfe" + SECRET.encode(), "not UTF-8 text"),
    "empty": (b"", "empty"),
    "whitespace-only": (b"  \n\t\n", "empty"),
    "two-lines": (f"{SECRET}\nmore\n".encode(), "holds a line break"),
    "carriage-return": (f"{SECRET}\rmore".encode(), "holds a line break"),
    "nul": (f"{SECRET}\0".encode(), "holds a line break or another control character"),
    "eight-mib": (b"a" * (8 * 1024 * 1024), f"larger than {MAX_SECRET_BYTES // 1024} KiB"),
}


def _plan(*flags: str) -> list[str]:
    return [
        "plan",
        "--snapshot",
        str(DEMO / "snapshot.json"),
        "--prometheus",
        "http://127.0.0.1:1",
        *flags,
    ]


@pytest.mark.parametrize("flag", ["--prometheus-bearer-token-file", "--prometheus-password-file"])
@pytest.mark.parametrize(("content", "problem"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_secret_file_that_cannot_work_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: bytes, problem: str
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(content)
    user = ["--prometheus-username", "u"] if flag.endswith("password-file") else []
    assert main(_plan(*user, flag, str(secret))) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rebalancer: {flag}: {secret}: {problem}")
    assert err.count("\n") == 1 and SECRET not in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prometheus-ca-file", "{garbage}"], "--prometheus-ca-file: {garbage} is not a PEM CA"),
        (
            ["--prometheus-cert-file", "{garbage}", "--prometheus-key-file", "{garbage}"],
            "--prometheus-cert-file, --prometheus-key-file: {garbage} and {garbage} are not",
        ),
        (
            ["--prometheus-header", f"X-Scope-OrgID: team\r{SECRET}"],
            "--prometheus-header X-Scope-OrgID: its value holds a line break",
        ),
        (
            ["--prometheus-header", f"Authorization Bearer {SECRET}"],
            "--prometheus-header (number 1): expected NAME:VALUE",
        ),
        (
            ["--prometheus-header", "A:b", "--prometheus-header", f"Bad Name:{SECRET}"],
            "--prometheus-header (number 2): expected NAME:VALUE",
        ),
    ],
    ids=[
        "garbage-ca",
        "garbage-cert-and-key",
        "header-with-cr",
        "header-without-colon",
        "bad-name",
    ],
)
def test_tls_files_and_headers_that_cannot_work_exit_2_without_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    given = [flag.replace("{garbage}", str(garbage)) for flag in flags]
    assert main(_plan(*given)) == 2
    err = capsys.readouterr().err
    assert err.startswith("rebalancer: " + message.replace("{garbage}", str(garbage)))
    assert err.count("\n") == 1 and SECRET not in err


def test_a_token_rotated_into_one_that_cannot_work_fails_the_query_by_name(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(SECRET + "\n")
    reader = PrometheusReader("http://127.0.0.1:1", 1.0, PrometheusAccess(bearer_token_file=token))
    token.write_bytes(b"\xff\xfe")
    failure = reader.query("up")
    assert isinstance(failure, TrafficFailure) and failure.reason == "unreachable"
    assert "cannot read a credential (not UTF-8 text)" in failure.detail
