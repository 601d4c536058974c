"""`rebalancer`: the command line. Each command's module reads its inputs, runs and prints; bad
input exits 2 and an unavailable source 3, with one line on stderr and no traceback."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rebalancer.cli import controller, offline
from rebalancer.cli.parser import build_parser
from rebalancer.errors import InputError, SourceUnavailableError, printable


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {
        "plan": offline.plan,
        "run": controller.run,
        "simulate": offline.simulate_command,
        "snapshot": offline.snapshot,
        "topology": offline.topology,
        "policy": offline.policy,
    }
    try:
        return commands[args.command](args)
    except (InputError, SourceUnavailableError) as error:
        print(printable(f"rebalancer: {error}"), file=sys.stderr)
        return error.exit_code
