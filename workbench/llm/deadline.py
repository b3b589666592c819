"""The deadline of a request answered while the caller waits (``_evaluate``, ``_evaluate/_batch``
below its job threshold, ``_predict``, ``_estimate``), seen by every LLM call made for it.

The route sets a ``Deadline`` (``within``) for its context; ``carry`` hands the context to the
threads that call models in parallel, so they all see the same one. Every LLM call checks it
before each attempt (``base.call_with_retries``) and waits for an answer no longer than what is
left (``bounded``); a passed deadline, or a caller that has hung up (``gone``), stops the
request with ``DeadlinePassed``, the 504 ``timeout_exception`` naming the model and how far it
got. Nothing goes on calling a model for a client that is gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from workbench.errors import WorkbenchError

_CURRENT: ContextVar[Deadline | None] = ContextVar("workbench_deadline", default=None)


class Deadline:
    """``seconds`` from now for ``what`` (the route, as the reason names it); ``gone`` says
    whether the caller has hung up. Counts the model calls answered, for the reason."""

    def __init__(self, what: str, seconds: float,
                 gone: Callable[[], bool] = lambda: False) -> None:
        self.what = what
        self.seconds = seconds
        self.gone = gone
        self.ends = time.monotonic() + seconds
        self.answered = 0
        self.progress = ""  # set by the code that knows its units ("3 of 10 queries ...")
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return self.ends - time.monotonic()

    def check(self, model_id: str) -> None:
        """Raise ``DeadlinePassed`` when no time is left or the caller has gone."""
        if self.remaining() <= 0:
            raise DeadlinePassed(self, model_id, hung_up=False)
        if self.gone():
            raise DeadlinePassed(self, model_id, hung_up=True)

    def answered_call(self) -> None:
        with self._lock:
            self.answered += 1


class DeadlinePassed(WorkbenchError):
    """504: the request ran out of time (or its caller hung up) while calling a model."""

    status = 504
    error_type = "timeout_exception"

    def __init__(self, deadline: Deadline, model_id: str, hung_up: bool) -> None:
        self.deadline = deadline
        self.model_id = model_id
        self.hung_up = hung_up
        super().__init__(self.describe())

    def describe(self) -> str:
        deadline = self.deadline
        why = ("the caller hung up" if self.hung_up else
               f"it did not finish within its deadline of {deadline.seconds:g}s "
               "(WORKBENCH_SYNC_DEADLINE)")
        calls = f"{deadline.answered} call{'' if deadline.answered == 1 else 's'}"
        reason = (f"{deadline.what} stopped calling model [{self.model_id}]: {why}; the model "
                  f"had answered {calls}")
        return reason + (f"; {deadline.progress}" if deadline.progress else "")

    def refresh(self) -> DeadlinePassed:
        """The same error, its reason saying the progress as it is now."""
        self.reason = self.describe()
        self.args = (self.reason,)
        return self


@contextmanager
def within(deadline: Deadline) -> Iterator[Deadline]:
    """Run the block (and the threads it ``carry``-s work to) under ``deadline``."""
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def check(model_id: str) -> None:
    """``Deadline.check`` of the current deadline, if any."""
    deadline = _CURRENT.get()
    if deadline is not None:
        deadline.check(model_id)


def bounded(seconds: float) -> float:
    """``seconds``, or what is left of the current deadline when that is shorter (at least a
    few milliseconds, so that a call times out rather than fails on a zero timeout)."""
    deadline = _CURRENT.get()
    if deadline is None:
        return seconds
    return max(0.01, min(seconds, deadline.remaining()))


def answered() -> None:
    deadline = _CURRENT.get()
    if deadline is not None:
        deadline.answered_call()
