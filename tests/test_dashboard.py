"""The committed dashboard is the one dashboards/build.py makes, and every query is scoped."""

from __future__ import annotations

import json

from dashboards.build import OUTPUT, dashboard_json


def test_the_committed_dashboard_is_current() -> None:
    assert OUTPUT.read_text() == dashboard_json(), "stale: run `python -m dashboards.build`"


def test_every_query_is_scoped_to_the_controller_namespace_and_uniquely_named() -> None:
    board = json.loads(dashboard_json())
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "namespace"]
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids) and all(ref_ids), panel["title"]
        assert all('namespace="$namespace"' in target["expr"] for target in panel["targets"])
