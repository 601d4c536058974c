"""The Kubernetes API edge: list what a snapshot needs, as raw JSON, page by page.

Raw JSON (not the client's model objects) goes to the same parser as a `kubectl get -o json` file,
so there is one parser to trust. Errors become SourceUnavailableError or InputError with one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError, MaxRetryError
from urllib3.util.retry import Retry

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import parse_items
from rebalancer.errors import InputError, SourceUnavailableError, one_line

ApiClient = client.ApiClient
"""The API client the clients share, named here so the layers above need not import kubernetes."""
_PAGE_SIZE = 500
CONNECT_SECONDS = 5.0
READ_SECONDS = 30.0
"""Per call, unless the call sets its own: the client's default is to wait forever, so an API
server that accepts connections and never answers held `run --once`, the state ConfigMap and the
lease renewal with it."""


class _RestWithDeadlines(rest.RESTClientObject):
    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        kwargs["_request_timeout"] = kwargs.get("_request_timeout") or (
            CONNECT_SECONDS,
            READ_SECONDS,
        )
        return super().request(method, url, *args, **kwargs)  # type: ignore[no-untyped-call]


def api_client(kubeconfig: str | None, *, retry_reads: bool = True) -> client.ApiClient:
    """In-cluster config when no kubeconfig is given and we run in a pod, else the kubeconfig.

    Reads (GET, LIST) are retried with backoff on 429, 5xx and dropped connections; writes are
    not, because a 429 on an eviction is the PDB's answer, to be respected, not repeated.
    Without `retry_reads` nothing is retried: for the webhook, which must answer the API server
    within its timeout rather than wait for an API server that hangs.
    """
    configuration = client.Configuration()
    try:
        loaded = False
        if kubeconfig is None:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                loaded = True
            except ConfigException:
                pass
        if not loaded:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration
            )
    # The client's loader trusts the document's shape: a list where a string belongs raised
    # AttributeError, a missing entry KeyError or IndexError.
    except (
        ConfigException,
        OSError,
        TypeError,
        ValueError,
        AttributeError,
        KeyError,
        IndexError,
        yaml.YAMLError,
    ) as error:
        where = kubeconfig or "default kubeconfig"
        problem = one_line(getattr(error, "problem", None) or error, 200)
        raise InputError(f"{where}: cannot load Kubernetes config ({problem})") from None
    configuration.retries = (
        Retry(
            total=4,
            read=1,  # an API server that does not answer within READ_SECONDS is asked once more
            backoff_factor=0.5,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=frozenset({"GET"}),
        )
        if retry_reads
        else False
    )
    api = client.ApiClient(configuration)
    api.rest_client = _RestWithDeadlines(configuration)
    return api


def snapshot_listers(api: client.ApiClient) -> list[tuple[str, str, Callable[..., Any]]]:
    """(kind, apiVersion, list function) of every kind a snapshot reads."""
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    discovery, autoscaling = client.DiscoveryV1Api(api), client.AutoscalingV2Api(api)
    batch = client.BatchV1Api(api)
    return [
        ("Node", "v1", core.list_node),
        ("Pod", "v1", core.list_pod_for_all_namespaces),
        ("PodDisruptionBudget", "policy/v1", policy.list_pod_disruption_budget_for_all_namespaces),
        ("ReplicaSet", "apps/v1", apps.list_replica_set_for_all_namespaces),
        ("Deployment", "apps/v1", apps.list_deployment_for_all_namespaces),
        ("StatefulSet", "apps/v1", apps.list_stateful_set_for_all_namespaces),
        ("Job", "batch/v1", batch.list_job_for_all_namespaces),
        (
            "HorizontalPodAutoscaler",
            "autoscaling/v2",
            autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
        ),
        ("Service", "v1", core.list_service_for_all_namespaces),
        (
            "EndpointSlice",
            "discovery.k8s.io/v1",
            discovery.list_endpoint_slice_for_all_namespaces,
        ),
    ]


def list_with_version(kind: str, lister: Callable[..., Any]) -> tuple[list[dict[str, Any]], str]:
    """Every item of one kind as raw JSON, page by page, with the list's resourceVersion, from
    which a watch can continue without missing a change."""
    items: list[dict[str, Any]] = []
    token = None
    while True:
        try:
            response = lister(
                limit=_PAGE_SIZE,
                _continue=token,
                _preload_content=False,
            )
            page = json.loads(response.data)
        except ApiException as error:
            raise SourceUnavailableError(
                f"Kubernetes API: list {kind}: HTTP {error.status} {error.reason}"
            ) from None
        except (HTTPError, OSError, ValueError) as error:
            raise SourceUnavailableError(
                f"Kubernetes API: list {kind}: {transport_problem(error)}"
            ) from None
        items.extend(page.get("items") or ())
        metadata = page.get("metadata") or {}
        token = metadata.get("continue")
        if not token:
            return items, str(metadata.get("resourceVersion", ""))


def transport_problem(error: Exception) -> str:
    """Why a call got no answer, in one line: after retries, the last attempt's reason (which
    names the host), not the retry wrapper's repetition of the URL."""
    reason = error.reason if isinstance(error, MaxRetryError) and error.reason else error
    return one_line(reason, 300) or type(reason).__name__


def list_raw(kind: str, lister: Callable[..., Any]) -> list[dict[str, Any]]:
    """Every item of one kind as raw JSON, page by page, so large clusters are not one response."""
    return list_with_version(kind, lister)[0]


def list_cluster(api: client.ApiClient) -> dict[str, Any]:
    """Everything a snapshot needs, as one `List` shaped like kubectl's output."""
    items = [
        {"apiVersion": api_version, "kind": kind, **item}
        for kind, api_version, lister in snapshot_listers(api)
        for item in list_raw(kind, lister)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def read_snapshot(api: client.ApiClient) -> Snapshot:
    document = list_cluster(api)
    return parse_items([(item, item["kind"]) for item in document["items"]], "Kubernetes API")
