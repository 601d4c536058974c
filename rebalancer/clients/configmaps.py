"""One store for the data the controller keeps in API objects: the policy, its state and the
placement hints in ConfigMaps, and the webhook's keys in a Secret.

Every read and write of those objects goes through here, so each fails the same way: a missing
object is None, a write that lost a race returns False (read again and retry), and anything else
is a SourceUnavailableError naming the object, so nothing is acted on in doubt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.kube_api import transport_problem
from rebalancer.errors import InputError, SourceUnavailableError

_T = TypeVar("_T")
_CONFLICT_ATTEMPTS = 5
_Object = client.V1ConfigMap | client.V1Secret


def parse_reference(reference: str, what: str) -> tuple[str, str]:
    """NAMESPACE/NAME, as a flag names an object."""
    namespace, _, name = reference.partition("/")
    if not namespace or not name:
        raise InputError(f"{what}: expected NAMESPACE/NAME, got {reference!r}")
    return namespace, name


@dataclass(frozen=True)
class Stored:
    data: dict[str, str]
    version: str | None
    """The resourceVersion read: a write at it fails if another writer came first."""


@dataclass
class DataStore:
    """The `data` of one ConfigMap or Secret, read whole and written whole."""

    api: client.ApiClient
    kind: Literal["ConfigMap", "Secret"]
    namespace: str
    name: str
    label: str
    """How errors name the object, such as "state ConfigMap"."""
    secret_type: str = "Opaque"
    request_timeout: float | None = None
    """Seconds per API call, where a caller must not wait long (the webhook); None: the
    client's own."""

    def read(self) -> Stored | None:
        """The object's data, or None when it does not exist."""
        with self._answering():
            try:
                found = self._read()
            except ApiException as error:
                if error.status == 404:
                    return None
                raise
        version = found.metadata.resource_version if found.metadata else None
        # Secrets' data is base64 text as read from JSON; the client only types it more loosely.
        return Stored({key: str(value) for key, value in (found.data or {}).items()}, version)

    def write(self, data: dict[str, str], version: str | None) -> bool:
        """Create the object (`version` None) or replace it at `version`; False when another
        writer came first."""
        with self._answering():
            try:
                if version is None:
                    self._create(self._body(data, None))
                else:
                    self._replace(self._body(data, version))
            except ApiException as error:
                if error.status == 409:
                    return False
                raise
        return True

    def put(self, data: dict[str, str]) -> None:
        """Replace the object whatever its version, or create it: for data only this process
        writes, such as the planner's state."""
        with self._answering():
            try:
                self._replace(self._body(data, None))
            except ApiException as error:
                if error.status != 404:
                    raise
                self._create(self._body(data, None))

    def update(self, change: Callable[[Stored | None], tuple[dict[str, str] | None, _T]]) -> _T:
        """Read, change, write at the version read; again on a conflict. `change` returns the
        new data (None: leave the object as it is) and the result to hand back."""
        for _attempt in range(_CONFLICT_ATTEMPTS):
            stored = self.read()
            data, result = change(stored)
            if data is None or self.write(data, stored.version if stored else None):
                return result
        raise self._unavailable(f"{_CONFLICT_ATTEMPTS} write conflicts")

    @contextmanager
    def _answering(self) -> Iterator[None]:
        """The API's errors, and the network's, as the one-line error that names the object."""
        try:
            yield
        except ApiException as error:
            raise self._unavailable(f"HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise self._unavailable(transport_problem(error)) from None

    def _unavailable(self, detail: str) -> SourceUnavailableError:
        return SourceUnavailableError(f"{self.label}: {detail}")

    def _body(self, data: dict[str, str], version: str | None) -> _Object:
        metadata = client.V1ObjectMeta(
            name=self.name, namespace=self.namespace, resource_version=version
        )
        if self.kind == "Secret":
            return client.V1Secret(metadata=metadata, type=self.secret_type, data=data)
        return client.V1ConfigMap(metadata=metadata, data=data)

    def _read(self) -> _Object:
        core = client.CoreV1Api(self.api)
        if self.kind == "Secret":
            return core.read_namespaced_secret(
                self.name, self.namespace, _request_timeout=self.request_timeout
            )
        return core.read_namespaced_config_map(
            self.name, self.namespace, _request_timeout=self.request_timeout
        )

    def _create(self, body: _Object) -> None:
        core = client.CoreV1Api(self.api)
        if isinstance(body, client.V1Secret):
            core.create_namespaced_secret(
                self.namespace, body, _request_timeout=self.request_timeout
            )
        else:
            core.create_namespaced_config_map(
                self.namespace, body, _request_timeout=self.request_timeout
            )

    def _replace(self, body: _Object) -> None:
        core = client.CoreV1Api(self.api)
        if isinstance(body, client.V1Secret):
            core.replace_namespaced_secret(
                self.name, self.namespace, body, _request_timeout=self.request_timeout
            )
        else:
            core.replace_namespaced_config_map(
                self.name, self.namespace, body, _request_timeout=self.request_timeout
            )
