"""tent: one-sided RDMA READ/WRITE between registered memory of processes.

The native API mirrors tent's C++ API (engine/include/tent/transfer_engine.h) in
Python's idiom; ``tent.mooncake`` is a drop-in for Mooncake's Python engine.
See docs/python.md.
"""

from . import _coexist

_coexist.check(__file__)

from . import _logging  # noqa: E402  (after the check: it loads the native module)
from ._error import Error
from ._tent import (
    LOCAL_SEGMENT_ID,
    Intent,
    OpCode,
    Request,
    TransferEngine,
    TransferState,
    __version__,
)

_logging.install()
flush_logs = _logging.flush

__all__ = [
    "Error",
    "Intent",
    "LOCAL_SEGMENT_ID",
    "OpCode",
    "Request",
    "TransferEngine",
    "TransferState",
    "__version__",
    "flush_logs",
]
