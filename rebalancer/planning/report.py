"""What `rebalancer plan` prints: a JSON document for machines and a table for people.

Pure functions of a cycle's outcome, so the JSON keys are fixed in one place and tested directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.cluster.topology import Topology
from rebalancer.cost.figures import Figures
from rebalancer.cost.routing import RoutingAdvice
from rebalancer.planning.cycle import CycleOutcome
from rebalancer.planning.owned_gangs import OwnedGang


def rounded(value: Any) -> Any:
    """Floats to a thousandth, so sums print as 120.0 rather than 119.99999999999999."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item) for item in value]
    return value


def figures_json(figures: Figures) -> dict[str, Any]:
    return {
        "total": figures.total,
        "crossing": figures.crossing,
        "weighted_cost": figures.weighted_cost,
        "monthly_cross_zone_cost": figures.monthly_cross_zone_cost,
        "by_workload_pair": [
            {
                "workloads": list(pair.workloads),
                "rate": pair.rate,
                "weighted_cost": pair.weighted_cost,
            }
            for pair in figures.by_workload_pair
        ],
    }


def outcome_json(outcome: CycleOutcome, unit: str, currency: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "unit": unit,
        "currency": currency,
        "nodes_missing_labels": _missing_labels_json(outcome.topology),
        "pods_on_unknown_nodes": dict(sorted(outcome.stray_pods.items())),
        "levels_not_in_force": [
            outcome.topology.levels[index].name for index in sorted(outcome.topology.not_in_force)
        ],
    }
    if outcome.failure is not None:
        document.update(
            moves=[],
            skipped=[],
            error={"reason": outcome.failure.reason, "detail": outcome.failure.detail},
        )
        return document
    assert outcome.plan is not None and outcome.traffic is not None
    plan = outcome.plan
    document.update(
        moves=[
            {
                "pod": move.pod,
                "workload": move.workload,
                "from": move.origin,
                "to": move.destination,
                "node": move.node,
                "gain": move.gain,
                "strategy": move.strategy,
                "reason": move.reason,
            }
            for move in plan.moves
        ],
        skipped=[
            {
                "pod": skip.pod,
                "reason": skip.reason,
                "category": skip.category,
                "strategy": skip.strategy,
            }
            for skip in plan.skipped
        ],
        candidates=plan.candidates,
        figures=figures_json(outcome.today or plan.before),
        routed=None if outcome.today is None else figures_json(plan.before),
        predicted=figures_json(plan.after),
        traffic={"series": outcome.traffic.series, "unmatched": dict(outcome.traffic.unmatched)},
        routing=[
            {
                "service": advice.service,
                "today": advice.today,
                "recommended": advice.recommended,
                "calls": advice.calls,
                "crossing_today": advice.crossing_today,
                "crossing_recommended": advice.crossing_recommended,
                "kept_local": advice.kept_local,
                "monthly_saved": advice.monthly_saved,
                "zones_without_endpoint": list(advice.zones_without_endpoint),
                "note": advice.note,
            }
            for advice in outcome.routing
        ],
        owned_gangs=[
            {
                "owner": gang.owner,
                "gang": gang.gang,
                "pods": gang.pods,
                "level": gang.level,
                "spans": gang.spans,
                "fits_in": gang.fits_in,
                "crossing": gang.crossing,
                "fix": gang.fix,
            }
            for gang in outcome.owned_gangs
        ],
    )
    return document


def _domain(domain: dict[str, str]) -> str:
    return " ".join(f"{level}={value}" for level, value in domain.items()) or "-"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    return [line.rstrip() for line in lines]


def _first_few(lines: list[str], more: str, shown: int) -> list[str]:
    """The first `shown` warnings, and one line counting the rest (`more` names them)."""
    if len(lines) <= shown:
        return lines
    return [*lines[:shown], f"warning: and {len(lines) - shown} more {more}"]


def stray_warnings(strays: Mapping[str, str], shown: int = 5) -> list[str]:
    """The first few pods on nodes the snapshot lacks, and how many more."""
    lines = [
        f"warning: pod {pod} is on node {node}, which the snapshot lacks; it is not moved"
        for pod, node in sorted(strays.items())
    ]
    return _first_few(lines, "pods on nodes the snapshot lacks", shown)


def outcome_table(outcome: CycleOutcome, unit: str, currency: str) -> str:
    lines: list[str] = []
    for index in sorted(outcome.topology.not_in_force):
        level = outcome.topology.levels[index]
        lines.append(f"note: no node carries {level.label}, so level {level.name} is not in force")
    lines.extend(missing_label_warnings(outcome.topology))
    lines.extend(stray_warnings(outcome.stray_pods))
    if outcome.failure is not None:
        lines.append(
            f"no moves: traffic data unusable ({outcome.failure.reason}): {outcome.failure.detail}"
        )
        return "\n".join(lines)
    assert outcome.plan is not None
    plan = outcome.plan
    columns = (
        [outcome.today, plan.before, plan.after] if outcome.today else [plan.before, plan.after]
    )
    now = columns[0]
    lines.append(f"traffic: {now.total:.6g} {unit} over {len(now.by_workload_pair)} workload pairs")
    rows = [["weighted cost", *(f"{c.weighted_cost:.6g}" for c in columns)]]
    rows += [
        [f"crossing {name}", *(f"{c.crossing[name]:.6g}" for c in columns)]
        for name in (level.name for level in outcome.topology.in_force())
    ]
    monthly = [c.monthly_cross_zone_cost for c in columns]
    if all(cost is not None for cost in monthly):
        rows.append(
            [f"cross-zone cost/month ({currency})", *(f"{m:.2f}" for m in monthly if m is not None)]
        )
    header = (
        ["figure", "now", "after routing", "after plan"]
        if outcome.today
        else ["figure", "now", "after plan"]
    )
    lines += ["", *_table(header, rows), ""]
    if plan.moves:
        lines.append(f"moves ({len(plan.moves)} of {plan.candidates} candidates):")
        lines += _table(
            ["pod", "from", "to", "gain", "strategy", "reason"],
            [
                [
                    m.pod,
                    _domain(m.origin),
                    _domain(m.destination),
                    f"{m.gain:.4g}",
                    m.strategy,
                    m.reason,
                ]
                for m in plan.moves
            ],
        )
    else:
        lines.append(f"no moves ({plan.candidates} candidates)")
    if plan.skipped:
        lines += ["", "skipped:"]
        lines += _table(
            ["pod", "reason", "strategy"], [[s.pod, s.reason, s.strategy] for s in plan.skipped]
        )
    lines += routing_lines(outcome.routing, currency)
    lines += owned_gang_lines(outcome.owned_gangs)
    return "\n".join(lines)


def owned_gang_lines(gangs: Sequence[OwnedGang]) -> list[str]:
    """Gangs another scheduler places, wider than they need: never moved, so the fix is the
    owner's."""
    if not gangs:
        return []
    rows = [
        [
            gang.gang,
            gang.owner,
            str(gang.pods),
            f"{gang.spans} {gang.level}s, fits in {gang.fits_in}",
            f"{gang.crossing:.4g}",
            gang.fix,
        ]
        for gang in gangs
    ]
    header = ["gang", "owner", "pods", "spread", "crossing", "fix with its owner"]
    title = "gangs another scheduler places, spread wider than they need (not moved):"
    return ["", title, *_table(header, rows)]


def routing_lines(routing: Sequence[RoutingAdvice], currency: str) -> list[str]:
    """The Services whose calls cross zones: what their routing is, what PreferSameZone would
    keep local, and the zones no routing can help (no endpoint there)."""
    crossing = [advice for advice in routing if advice.crossing_today > 0]
    if not crossing:
        return []
    rows = [
        [
            advice.service,
            advice.today,
            advice.recommended or "-",
            f"{advice.crossing_today:.4g} of {advice.calls:.4g}",
            f"{advice.kept_local:.4g}",
            "-" if advice.monthly_saved is None else f"{advice.monthly_saved:.2f}",
            _routing_note(advice),
        ]
        for advice in crossing
    ]
    header = ["service", "routing", "recommended", "crossing", "kept local"]
    header += [f"saved/month ({currency})", "note"]
    return ["", "routing (Services whose calls cross zones):", *_table(header, rows)]


def _routing_note(advice: RoutingAdvice) -> str:
    notes = [advice.note] if advice.note else []
    if advice.zones_without_endpoint:
        zones = ", ".join(advice.zones_without_endpoint)
        notes.append(f"no endpoint in {zones}: a move or a replica there would keep it local")
    return "; ".join(notes)


def missing_label_warnings(topology: Topology, shown: int = 5) -> list[str]:
    """The first few nodes that lack a level's label, and how many more."""
    lines = [
        f"warning: node {node} lacks the label of level(s) {', '.join(levels)}"
        for node, levels in sorted(topology.missing_labels.items())
    ]
    return _first_few(lines, "nodes lack a level's label", shown)


def _missing_labels_json(topology: Topology) -> dict[str, list[str]]:
    return {node: list(levels) for node, levels in sorted(topology.missing_labels.items())}


def topology_table(topology: Topology) -> str:
    """The levels, widest first: label, nodes placed at that level, domains, in force or not."""
    rows = [
        [
            level.name,
            level.label,
            str(nodes),
            str(domains),
            "no: no node carries the label" if index in topology.not_in_force else "yes",
        ]
        for index, (level, nodes, domains) in enumerate(topology.coverage())
    ]
    header = ["level", "label", "nodes", "domains", "in force"]
    lines = _table(header, rows)
    lines.append(f"{len(topology.node_locations)} nodes")
    return "\n".join([*lines, *missing_label_warnings(topology)])


def topology_json(topology: Topology) -> dict[str, Any]:
    return {
        "levels": [
            {
                "name": level.name,
                "label": level.label,
                "weight": level.weight,
                "nodes": nodes,
                "domains": domains,
                "in_force": index not in topology.not_in_force,
            }
            for index, (level, nodes, domains) in enumerate(topology.coverage())
        ],
        "nodes": len(topology.node_locations),
        "nodes_missing_labels": _missing_labels_json(topology),
    }
