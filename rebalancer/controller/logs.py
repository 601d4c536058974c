"""JSON log lines, one object per line, so log pipelines can index them without parsing prose.

A call may add fields of its own with `extra={"fields": {...}}`: a move's pod, result and target
domain are then keys of the line, not text inside its message.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update({key: value for key, value in fields.items() if key not in entry})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # APScheduler logs every run at INFO; its warnings and errors are enough.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    # urllib3 logs every retry of every call; the call's final failure is what we report.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
