"""The webhook's serving keys: when they must be replaced, and that a renewal keeps the CA."""

from __future__ import annotations

import datetime

from rebalancer.webhook.serving_keys import keys_from_secret, secret_data
from rebalancer.webhook.tls import ServingKeys, issue_serving_keys, renewed, unfit_because

NOW = datetime.datetime.now(datetime.UTC)
NAMES = ["rebalancer.ops.svc"]
IPS = ["127.0.0.1"]


def test_fresh_keys_are_fit() -> None:
    assert unfit_because(issue_serving_keys(NAMES, IPS), NAMES, IPS, NOW) is None


def test_keys_near_expiry_are_unfit() -> None:
    keys = issue_serving_keys(NAMES, IPS)
    reason = unfit_because(keys, NAMES, IPS, NOW + datetime.timedelta(days=300))
    assert reason is not None and reason.startswith("it expires at")


def test_keys_for_other_names_are_unfit() -> None:
    keys = issue_serving_keys(NAMES, IPS)
    assert unfit_because(keys, ["other.ops.svc"], IPS, NOW) == (
        "the certificate does not name ['other.ops.svc']"
    )
    assert unfit_because(keys, NAMES, ["10.0.0.1"], NOW) == (
        "the certificate does not name ['10.0.0.1']"
    )


def test_mismatched_or_foreign_keys_are_unfit() -> None:
    ours, theirs = issue_serving_keys(NAMES, IPS), issue_serving_keys(NAMES, IPS)
    swapped_key = ServingKeys(ours.ca, ours.ca_key, ours.certificate, theirs.key)
    assert unfit_because(swapped_key, NAMES, IPS, NOW) == "a key does not match its certificate"
    foreign_ca = ServingKeys(theirs.ca, theirs.ca_key, ours.certificate, ours.key)
    reason = unfit_because(foreign_ca, NAMES, IPS, NOW)
    assert reason is not None and reason.startswith("unreadable or not issued by its CA")
    garbage = ServingKeys(b"not pem", ours.ca_key, ours.certificate, ours.key)
    assert unfit_because(garbage, NAMES, IPS, NOW) is not None


def test_renewal_keeps_the_ca_and_makes_a_new_certificate() -> None:
    keys = issue_serving_keys(NAMES, IPS)
    fresh = renewed(keys, ["more.ops.svc", *NAMES], IPS)
    assert (fresh.ca, fresh.ca_key) == (keys.ca, keys.ca_key)
    assert fresh.certificate != keys.certificate and fresh.key != keys.key
    assert unfit_because(fresh, ["more.ops.svc", *NAMES], IPS, NOW) is None


def test_secret_data_round_trips_and_incomplete_data_reads_as_none() -> None:
    keys = issue_serving_keys(NAMES, IPS)
    data = secret_data(keys)
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert keys_from_secret(data) == keys
    assert keys_from_secret({k: v for k, v in data.items() if k != "ca.key"}) is None
    assert keys_from_secret({**data, "tls.key": "%%%"}) is None
    assert keys_from_secret(None) is None
