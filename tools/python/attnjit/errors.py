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


class MissingDependencyError(AttnjitError, ImportError):
    """attnjit needs a package that is not installed (torch, for tensors).

    Also an ImportError, so ``except ImportError`` written for the bare
    ModuleNotFoundError keeps working.
    """

    def __init__(self, message):
        AttnjitError.__init__(self, Status.UNSUPPORTED, message)


def missing_torch(cause):
    """The error for an entry point that takes tensors when torch cannot be imported."""
    return MissingDependencyError(
        "attnjit's tensor entry points take torch tensors (exported through DLPack), but torch cannot be "
        f"imported ({cause}); install PyTorch (pip install torch), or call the C API (attnjit.h) with "
        "DLTensors from another DLPack producer")
