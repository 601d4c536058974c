"""The webhook's keys, shared by every replica through one Secret.

The Service in front of the webhook sends each admission request to any replica, and the API
server trusts only the CA in caBundle. If each replica made its own CA, the last to patch
caBundle would win and the others' answers would fail TLS (and, with failurePolicy Ignore, their
pods would go unsteered). So the first replica to start stores a CA and serving certificate in a
Secret and the others serve the same ones. When the certificate nears expiry, or must name other
hosts, one replica renews it from the same CA, so caBundle does not change under the others.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import logging

from rebalancer.clients.configmaps import DataStore, Stored
from rebalancer.clients.kube_api import ApiClient
from rebalancer.errors import SourceUnavailableError
from rebalancer.webhook.tls import (
    ServingKeys,
    issue_serving_keys,
    pair_problem,
    renewed,
    unfit_because,
)

_log = logging.getLogger(__name__)
_FIELDS = {"ca.crt": "ca", "ca.key": "ca_key", "tls.crt": "certificate", "tls.key": "key"}
_ISSUED_FIELDS = {field: attribute for field, attribute in _FIELDS.items() if field != "ca.key"}
"""What an outside issuer such as cert-manager writes: no CA key, which stays with the issuer."""


def keys_from_secret(
    data: dict[str, str] | None, fields: dict[str, str] = _FIELDS
) -> ServingKeys | None:
    """The keys in a Secret's data, or None when one of `fields` is missing or not base64."""
    data = data or {}
    try:
        decoded = {
            attribute: base64.b64decode(data[field], validate=True)
            for field, attribute in fields.items()
        }
    except (KeyError, binascii.Error):
        return None
    return ServingKeys(**{"ca_key": b"", **decoded})


def _secret(api: ApiClient, secret: tuple[str, str]) -> DataStore:
    namespace, name = secret
    return DataStore(
        api, "Secret", namespace, name, f"Secret {namespace}/{name}", "kubernetes.io/tls"
    )


def issued_serving_keys(api: ApiClient, secret: tuple[str, str]) -> ServingKeys:
    """Keys an outside issuer keeps in the Secret (cert-manager's Certificate, for one): read
    and served, never written; the issuer renews them and its CA injector fills caBundle."""
    store = _secret(api, secret)
    stored = store.read()
    if stored is None:
        raise SourceUnavailableError(f"{store.label}: HTTP 404 (has the issuer issued it yet?)")
    keys = keys_from_secret(stored.data, _ISSUED_FIELDS)
    if keys is None:
        raise SourceUnavailableError(f"{store.label}: needs ca.crt, tls.crt and tls.key")
    problem = pair_problem(keys)
    if problem is not None:
        raise SourceUnavailableError(f"{store.label}: {problem}")
    return keys


def secret_data(keys: ServingKeys) -> dict[str, str]:
    return {
        field: base64.b64encode(getattr(keys, attribute)).decode()
        for field, attribute in _FIELDS.items()
    }


def _replacement(
    keys: ServingKeys | None, dns_names: list[str], ip_addresses: list[str], now: datetime.datetime
) -> ServingKeys:
    """Renewed from the same CA when it is still good for long enough, else all new."""
    if keys is not None:
        try:
            candidate = renewed(keys, dns_names, ip_addresses)
        except (ValueError, TypeError):
            pass
        else:
            if unfit_because(candidate, dns_names, ip_addresses, now) is None:
                return candidate
    return issue_serving_keys(dns_names, ip_addresses)


def shared_serving_keys(
    api: ApiClient,
    secret: tuple[str, str],
    *,
    dns_names: list[str],
    ip_addresses: list[str],
) -> ServingKeys:
    """The keys in the Secret (namespace, name), made or renewed there first when needed.

    Writes are conditional (create, or replace at the resourceVersion read), so replicas that
    race all end up serving whichever write the API server accepted.
    """
    store = _secret(api, secret)

    def settle(stored: Stored | None) -> tuple[dict[str, str] | None, tuple[ServingKeys, str]]:
        """The keys to serve, and why they were written ("" when they were not)."""
        now = datetime.datetime.now(datetime.UTC)
        keys = keys_from_secret(stored.data) if stored is not None else None
        if keys is not None:
            reason = unfit_because(keys, dns_names, ip_addresses, now)
            if reason is None:
                return None, (keys, "")
        else:
            reason = "missing" if stored is None else "incomplete"
        fresh = _replacement(keys, dns_names, ip_addresses, now)
        return secret_data(fresh), (fresh, reason)

    keys, written_because = store.update(settle)
    if written_because:
        _log.info("webhook keys written to %s: the old ones were %s", store.label, written_because)
    return keys
