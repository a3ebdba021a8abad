"""AttnjitError and the status codes of attnjit.h (same numbers)."""

import enum


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    NO_DEVICE = 3
    CUDA = 4
    COMPILE = 5
    CACHE = 6
    CACHE_MISS = 7
    NOT_PLANNED = 8
    WORKSPACE_TOO_SMALL = 9
    INTERNAL = 10


class AttnjitError(RuntimeError):
    """A call into attnjit failed.

    ``status`` is a :class:`Status` (an int outside it if the library is newer
    than this module); ``message`` names the offending argument, its value and
    what is allowed, as the library wrote it.
    """

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        name = status.name if isinstance(status, Status) else f"status {int(status)}"
        super().__init__(f"{name}: {message}")


def invalid_argument(message):
    """An AttnjitError for an argument this module refuses before calling C."""
    return AttnjitError(Status.INVALID_ARGUMENT, message)
