"""core/v1 Events about pods and the policy ConfigMap, as `kubectl describe` shows them.

Per-pod detail belongs in Events, not in metric labels.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

COMPONENT = "topology-rebalancer"
_log = logging.getLogger(__name__)


class EventRecorder:
    """core/v1 Events about pods and the policy ConfigMap, as `kubectl describe` shows them."""

    def __init__(
        self,
        api: client.ApiClient,
        clock: Callable[[], datetime.datetime],
        instance: str = COMPONENT,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.clock = clock
        self.instance = instance
        """The replica that reports (its pod name): with two replicas, which one acted."""

    def record(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        warning: bool = False,
    ) -> None:
        now = self.clock()
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version="v1", kind=kind, name=name, namespace=namespace
            ),
            reason=reason,
            message=message[:1024],
            type="Warning" if warning else "Normal",
            source=client.V1EventSource(component=COMPONENT, host=None),
            reporting_component=COMPONENT,
            reporting_instance=self.instance,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        try:
            self.core.create_namespaced_event(namespace, event)
        except (ApiException, HTTPError, OSError) as error:
            # An Event lost is a message lost, not a reason to stop: the metric and log remain.
            _log.warning("could not record event %s on %s/%s: %s", reason, namespace, name, error)
