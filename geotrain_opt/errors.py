"""Errors that reach the user as one clear line, never as a traceback."""
from __future__ import annotations


class GeoTrainError(Exception):
    """Base class: the CLI prints ``str(err)`` and exits non-zero."""


MAX_MESSAGE = 400       # a 200 KB bad value is not echoed whole (issue 39)


def short(message: str) -> str:
    """The message cut to MAX_MESSAGE characters, saying so."""
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + " ... (cut)"


class InstanceError(GeoTrainError):
    """A malformed or inconsistent instance; ``field`` is the dotted path of the culprit."""

    def __init__(self, field: str, message: str, source: str | None = None) -> None:
        self.field = field = short(field)
        self.message = message = short(message)
        self.source = source
        where = f"instance {source}" if source else "instance"
        super().__init__(f"{where}: {field}: {message}")

    def __reduce__(self):   # picklable, so a worker process can report it
        return (InstanceError, (self.field, self.message, self.source))


class PlanError(GeoTrainError):
    """A plan file that cannot even be evaluated (wrong shape, unknown device)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field = short(field)
        self.message = message = short(message)
        super().__init__(f"plan: {field}: {message}")

    def __reduce__(self):
        return (PlanError, (self.field, self.message))


class SolverError(GeoTrainError):
    """A solver refused the request (instance too large for brute force, bad option)."""
