"""The deadline of a route answered while the caller waits (``llm.deadline``), and how the route
notices that its caller has hung up.

gunicorn hands the app the client's socket (``gunicorn.socket``): the connection from the
front, which HAProxy closes when the client aborts (``option abortonclose`` in
``serving/haproxy.cfg.j2``). A socket that polls readable but has nothing to read is closed.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager

from flask import request

from workbench.api import services
from workbench.llm.deadline import Deadline, within


def caller_gone() -> Callable[[], bool]:
    """Whether the client of the current request has closed its connection (checked before
    each model call; never blocks)."""
    sock = request.environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return lambda: False

    def gone() -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    return gone


def sync_deadline(what: str) -> AbstractContextManager[Deadline]:
    """``WORKBENCH_SYNC_DEADLINE`` for the route ``what`` (as its 504 names it)."""
    return within(Deadline(what, services().config.sync_deadline, caller_gone()))
