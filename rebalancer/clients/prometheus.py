"""The Prometheus HTTP edge: one GET per query, the failure classified, the bytes handed to the pure
parser that reads recorded files too.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from rebalancer.traffic.answer import http_failure, parse_answer
from rebalancer.traffic.model import AnswerOrFailure, TrafficFailure
from rebalancer.traffic.queries import Queries

MAX_SECRET_BYTES = 64 * 1024
"""A token or password file larger than this is refused: a server would answer 431."""


def read_secret(path: Path) -> str:
    """A token or password file as sent: UTF-8 on one line, the whitespace around it dropped.
    A ValueError says what is wrong with it, never what it holds."""
    with path.open("rb") as file:
        raw = file.read(MAX_SECRET_BYTES + 1)
    if len(raw) > MAX_SECRET_BYTES:
        raise ValueError(f"larger than {MAX_SECRET_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if not text:
        raise ValueError("empty")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
        raise ValueError("holds a line break or another control character")
    return text


@dataclass(frozen=True)
class PrometheusAccess:
    """How to reach a secured Prometheus (Thanos, Mimir, Cortex, a managed service). Secrets
    come from files, a mounted Secret in a cluster, and never from the policy ConfigMap; the
    token and password files are read at every query, so a rotated token is used at once."""

    bearer_token_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    """Trust this CA bundle instead of the system's."""
    cert_file: Path | None = None
    """A client certificate (with key_file), for a server that asks for one."""
    key_file: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every query: a tenant header such as X-Scope-OrgID, for example."""

    def problems(self) -> list[str]:
        """What cannot work, named by flag, found before the first query."""
        found = []
        if (self.username is None) != (self.password_file is None):
            found.append(
                "basic auth needs both --prometheus-username and --prometheus-password-file"
            )
        if self.bearer_token_file is not None and self.username is not None:
            found.append("give either a bearer token or basic auth, not both")
        if (self.cert_file is None) != (self.key_file is None):
            found.append(
                "a client certificate needs --prometheus-cert-file and --prometheus-key-file"
            )
        files = {
            "--prometheus-bearer-token-file": self.bearer_token_file,
            "--prometheus-password-file": self.password_file,
            "--prometheus-ca-file": self.ca_file,
            "--prometheus-cert-file": self.cert_file,
            "--prometheus-key-file": self.key_file,
        }
        for flag, path in files.items():
            if path is not None and not path.is_file():
                found.append(f"{flag}: {path} is not a readable file")
        if found:
            return found
        for flag, path in list(files.items())[:2]:
            if path is not None:
                try:
                    read_secret(path)
                except (OSError, ValueError) as error:
                    found.append(f"{flag}: {path}: {error}")
        found += self._tls_problems()
        return found

    def _tls_problems(self) -> list[str]:
        """The CA bundle and client certificate as the TLS library would load them, so a file
        of something else is named before the first query rather than failing every one."""
        found = []
        if self.ca_file is not None:
            try:
                ssl.create_default_context(cafile=str(self.ca_file))
            except (ssl.SSLError, ValueError, OSError):
                found.append(f"--prometheus-ca-file: {self.ca_file} is not a PEM CA bundle")
        if self.cert_file is not None and self.key_file is not None:
            try:
                ssl.create_default_context().load_cert_chain(
                    str(self.cert_file), str(self.key_file)
                )
            except (ssl.SSLError, ValueError, OSError):
                found.append(
                    f"--prometheus-cert-file, --prometheus-key-file: {self.cert_file} and "
                    f"{self.key_file} are not a PEM certificate and its key"
                )
        return found

    def _secret(self, path: Path) -> str:
        return read_secret(path)

    def request_options(self) -> dict[str, Any]:
        """Per query: the Authorization header from the files as they are now, the headers,
        and TLS. Given per request, because requests lets REQUESTS_CA_BUNDLE from the
        environment replace a session's CA bundle, silently."""
        headers = dict(self.headers)
        if self.bearer_token_file is not None:
            headers["Authorization"] = f"Bearer {self._secret(self.bearer_token_file)}"
        elif self.username is not None and self.password_file is not None:
            pair = f"{self.username}:{self._secret(self.password_file)}".encode()
            headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        options: dict[str, Any] = {"headers": headers}
        if self.ca_file is not None:
            options["verify"] = str(self.ca_file)
        if self.cert_file is not None and self.key_file is not None:
            options["cert"] = (str(self.cert_file), str(self.key_file))
        return options


class PrometheusReader:
    """Asks Prometheus over a requests session with urllib3's retry mounted for the URL,
    classifies what went wrong, and hands every answer's bytes to the same pure parser that reads
    recorded files: decoding only the labels the queries name is what keeps a million series
    cheap, so no client library that decodes the whole answer stands in between."""

    def __init__(
        self, url: str, timeout_seconds: float, access: PrometheusAccess | None = None
    ) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        self.access = access or PrometheusAccess()
        # One quick retry for a dropped connection or a gateway error, none for a slow answer:
        # asking again would only double the wait (and hide the timeout behind a generic
        # ConnectionError). A longer wait belongs to the next cycle.
        retry = Retry(total=1, read=False, backoff_factor=0.2, status_forcelist=(502, 503, 504))
        self._base = url.rstrip("/")
        self._session = requests.Session()
        self._session.mount(self._base, HTTPAdapter(max_retries=retry))

    def read(self, queries: Queries) -> tuple[AnswerOrFailure, AnswerOrFailure | None]:
        """The traffic answer, then, only if it came, the one that dates it."""
        answer = self.query(queries.traffic, queries.labels)
        freshness = None if isinstance(answer, TrafficFailure) else self.query(queries.freshness)
        return answer, freshness

    def query(self, promql: str, labels: tuple[str, ...] = ()) -> AnswerOrFailure:
        try:
            options = self.access.request_options()
        except (OSError, ValueError) as error:
            return TrafficFailure("unreachable", f"{self.url}: cannot read a credential ({error})")
        try:
            response = self._session.get(
                f"{self._base}/api/v1/query",
                params={"query": promql},
                timeout=self.timeout_seconds,
                **options,
            )
        except requests.Timeout:
            return TrafficFailure("timeout", f"{self.url}: no answer in {self.timeout_seconds:g}s")
        except requests.RequestException as error:
            return TrafficFailure("unreachable", f"{self.url}: {type(error).__name__}")
        if response.status_code != 200:
            return http_failure(self.url, response.status_code, response.content)
        parsed = parse_answer(response.content, labels)
        if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
            return TrafficFailure("bad-response", f"{self.url}: {parsed.detail}")
        return parsed
