"""Debian's Prometheus server on loopback, for tests and `make cluster-up`.

A real server, because what the rebalancer must get right is how a real one answers: rate()
windows, staleness, error bodies and timeouts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import requests
import yaml

from harness.process import free_port, spawn, wait_until

Engine = Literal["prometheus", "victoria-metrics"]
"""Two PromQL engines from Debian: Prometheus, and VictoriaMetrics, whose MetricsQL differs."""


@dataclass(frozen=True)
class ScrapeJob:
    targets: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    """Added to every scraped series, as a ServiceMonitor adds `namespace`."""


class PrometheusServer:
    """Debian's `prometheus` on a free loopback port, scraping the given targets every second
    (job `hubble`), and any `extra_jobs` (name -> targets and labels), with `rule_files`.

    With `web_config` (Prometheus's --web.config.file: basic auth, TLS, client certificates) its
    own queries go through `session`, which must carry what that config asks for."""

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        *,
        extra_jobs: Mapping[str, ScrapeJob] | None = None,
        rule_files: Sequence[Path] = (),
        web_config: Mapping[str, Any] | None = None,
        session: requests.Session | None = None,
        engine: Engine = "prometheus",
    ) -> None:
        binary = shutil.which(engine)
        if binary is None:
            raise RuntimeError(f"Debian's {engine} is not installed (make installs it)")
        if engine != "prometheus" and (web_config or rule_files):
            raise ValueError("web configs and rule files are Prometheus's only, here")
        self.port = free_port()
        tls = web_config is not None and "tls_server_config" in web_config
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.session = session or requests.Session()
        self.session.trust_env = False  # else REQUESTS_CA_BUNDLE silently replaces its CA
        workdir.mkdir(parents=True, exist_ok=True)
        flags = []
        if web_config is not None:
            (workdir / "web.yml").write_text(yaml.safe_dump(dict(web_config)))
            flags.append(f"--web.config.file={workdir / 'web.yml'}")
        config = workdir / "prometheus.yml"
        jobs = {"hubble": ScrapeJob(targets), **(extra_jobs or {})}
        document: dict[str, Any] = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": name,
                    "static_configs": [{"targets": job.targets, "labels": job.labels}],
                }
                for name, job in jobs.items()
            ],
        }
        if engine == "prometheus":
            document["global"]["evaluation_interval"] = "1s"
            document["rule_files"] = [str(path) for path in rule_files]
            argv = [
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ]
        else:
            argv = [
                f"-promscrape.config={config}",
                f"-storageDataPath={workdir / 'tsdb'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-loggerLevel=WARN",
                # It hides the last 30 s from queries by default, for late samples.
                "-search.latencyOffset=0s",
            ]
        self.ready_path = "/-/ready" if engine == "prometheus" else "/health"
        config.write_text(yaml.safe_dump(document))
        self.component = spawn(engine, [binary, *argv, *flags], workdir / f"{engine}.log")

    def wait_ready(self, timeout: float = 30) -> None:
        ready = f"{self.url}{self.ready_path}"
        self._wait(lambda: self.session.get(ready, timeout=1).ok, timeout, "ready")

    def query(self, promql: str) -> list[dict[str, Any]]:
        query = f"{self.url}/api/v1/query"
        body = self.session.get(query, params={"query": promql}, timeout=5)
        result: list[dict[str, Any]] = body.json()["data"]["result"]
        return result

    def wait_for(self, promql: str, series: int, timeout: float = 30) -> None:
        """Until `promql` returns at least `series` series."""
        self._wait(lambda: len(self.query(promql)) >= series, timeout, f"{series} x {promql}")

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        def alive_and(check: Callable[[], bool]) -> bool:
            if not self.component.alive():
                code = self.component.process.returncode
                raise RuntimeError(f"prometheus exited with {code}:\n{self.component.log_tail()}")
            return check()

        wait_until(lambda: alive_and(check), timeout, f"prometheus: {what}")

    def stop(self) -> None:
        self.component.stop()
