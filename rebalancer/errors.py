"""The two kinds of failure a user must be able to tell apart, each with its own exit code.

A bad input is the user's to fix (exit 2); an unavailable source may heal by itself (exit 3).
Both carry a one-line message that names the field, file or source, so the CLI never needs a
traceback to explain itself.
"""


class InputError(Exception):
    """A policy, snapshot, traffic file or query that cannot be used as given."""

    exit_code = 2


class SourceUnavailableError(Exception):
    """Prometheus or the Kubernetes API could not answer; nothing may be planned on doubt."""

    exit_code = 3


def one_line(value: object, limit: int | None = None) -> str:
    """Outside text (an answer, an exception, a validator's message) fit for a one-line error:
    whitespace, newlines included, folded to single spaces, and cut at `limit` characters."""
    folded = " ".join(str(value).split())
    return folded if limit is None else folded[:limit]
