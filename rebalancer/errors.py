"""The two kinds of failure a user must be able to tell apart, each with its own exit code.

A bad input is the user's to fix (exit 2); an unavailable source may heal by itself (exit 3).
Both carry a one-line message that names the field, file or source, so the CLI never needs a
traceback to explain itself.
"""

EXIT_OK = 0


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


def where_and_what(validation_error: object) -> tuple[str, str]:
    """msgspec's "Expected `str`, got `int` - at `$[3].metric.pod`" split into the path after
    `$` ("[3].metric.pod", empty at the root) and the problem ("expected `str`, got `int`"), so
    callers can put the path first, as every other input error does."""
    problem, _, path = one_line(validation_error).partition(" - at `$")
    return path.removesuffix("`"), problem[:1].lower() + problem[1:]


_CONTROLS = {
    code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0)) if chr(code) != "\n"
}
"""Every C0 and C1 control but the newline, and DEL, each as its escape."""


def printable(text: str) -> str:
    """Text for a terminal, its lines kept: a label value or name holding an escape sequence
    (a zone label set to "\\x1b]0;..." on a node) would otherwise drive the operator's
    terminal."""
    return text.translate(_CONTROLS)
