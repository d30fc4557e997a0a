"""Exceptions a backend raises to answer an RPC with a specific gRPC status code.

Kept free of grpc imports so pure logic (validation, device selection) can be unit-tested
without the runtime; ``backends.common.server`` maps ``code`` to ``grpc.StatusCode``.
"""


class BackendError(Exception):
    """Base class: ``code`` is the name of a ``grpc.StatusCode`` member."""

    code = "INTERNAL"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgument(BackendError):
    code = "INVALID_ARGUMENT"


class NotFound(BackendError):
    code = "NOT_FOUND"


class FailedPrecondition(BackendError):
    code = "FAILED_PRECONDITION"


class Busy(BackendError):
    """The server is busy with something that excludes this call (a LoadModel in flight)."""

    code = "ABORTED"


class Unimplemented(BackendError):
    code = "UNIMPLEMENTED"


def require(condition: bool, message: str) -> None:
    """Raise InvalidArgument(message) unless condition holds."""
    if not condition:
        raise InvalidArgument(message)


NO_MODEL_MESSAGE = "no model loaded: call LoadModel first"
