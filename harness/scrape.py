"""A running controller's /metrics as the e2e tests and the soak read it: every sample by name
and labels, parsed by prometheus_client's own text parser."""

from __future__ import annotations

import requests
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""(sample name, sorted label pairs) -> value."""


def scrape(port: int) -> Samples:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` that carry all these labels."""
    return sum(
        value
        for (sample, found), value in samples.items()
        if sample == name and all((key, v) in found for key, v in labels.items())
    )


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """The samples named `name`, summed per value of `label`."""
    sums: dict[str, float] = {}
    for (sample, found), value in samples.items():
        key = dict(found).get(label)
        if sample == name and key is not None:
            sums[key] = sums.get(key, 0.0) + value
    return sums
