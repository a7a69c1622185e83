"""tent's log lines as records of Python's ``logging`` (logger ``tent``).

On import the native log sink switches from stderr to a queue, and a daemon thread
hands each line to ``logging.getLogger("tent." + component)`` with the level mapped
(trace -> 5 "TRACE", debug -> DEBUG, info -> INFO, warn -> WARNING, error -> ERROR).
Which lines tent produces at all is still set by ``log.level`` / ``log.components`` of
the config and ``TENT_LOG_LEVEL``; ``logging``'s own levels and handlers filter and route
what arrives. Without any logging configuration, Python's last-resort handler prints
WARNING and above to stderr, as tent did itself. ``TENT_LOG_STDERR=1`` keeps tent's
own stderr lines instead. Each record carries ``tent_thread`` (kernel thread id) and
``tent_lcore`` (-1 off lcores) attributes.
"""

import atexit
import logging
import os
import threading

from . import _tent

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}

logger = logging.getLogger("tent")

# Held by whoever takes records from the queue until they are handed on, so records stay
# in order and flush() returns only after every record queued before it was handled.
_lock = threading.Lock()
_thread = None
_stop = threading.Event()


def _emit(records, dropped):
    if dropped:
        logger.warning("%d tent log records were dropped (the queue was full)", dropped)
    for component, level, message, created, thread, lcore in records:
        target = logging.getLogger("tent." + component)
        pylevel = LEVELS.get(level, logging.ERROR)
        if not target.isEnabledFor(pylevel):
            continue
        record = target.makeRecord(
            target.name, pylevel, "tent", 0, message, None, None,
            extra={"tent_thread": thread, "tent_lcore": lcore})
        record.created = created
        record.msecs = (created - int(created)) * 1000.0
        target.handle(record)


def flush(timeout_s=0.0):
    """Hands every queued tent line to logging now (waits up to timeout_s for one)."""
    if _thread is None:
        return
    with _lock:
        _emit(*_tent._log_drain(timeout_s))


def _run():
    # Waits without the lock: a thread that held it through each wait and took it again at
    # once starved flush() and the exit handler (Python's locks are not fair).
    while not _stop.is_set():
        if _tent._log_wait(0.2):
            with _lock:
                _emit(*_tent._log_drain(0.0))


def _at_exit():
    if _thread is None:  # a forked child: the drain thread was the parent's
        return
    # Engines close first so the lines their close writes are not lost.
    _tent._close_all()
    _stop.set()
    _thread.join(timeout=1.0)
    flush()


def _after_fork_in_child():
    # Only the forking thread lives on: the drain thread and whatever held _lock are the
    # parent's. Lines go to stderr again, and nothing here waits on a lock nobody frees.
    global _lock, _thread
    _lock = threading.Lock()
    _thread = None
    _tent._log_to_python(False)


def install():
    global _thread
    if os.environ.get("TENT_LOG_STDERR", "") not in ("", "0"):
        return
    if _thread is not None:
        return
    _tent._log_to_python(True)
    _thread = threading.Thread(target=_run, name="tent-log", daemon=True)
    _thread.start()
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)
