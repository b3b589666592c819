"""The order the raw-HTTP paths try the cluster's nodes in (``store.nodes``)."""

from __future__ import annotations

import time

from workbench.store.nodes import Nodes


def test_round_robin_over_the_nodes_up_then_those_down() -> None:
    nodes = Nodes(["a", "b", "c"], down_for=60)
    assert [nodes.order()[0] for _ in range(4)] == ["a", "b", "c", "a"]
    nodes.down("b")  # turns 5, 6, 7 start at b, c, a; b goes last while it is down
    assert [nodes.order() for _ in range(3)] == [["c", "a", "b"], ["c", "a", "b"],
                                                 ["a", "c", "b"]]
    nodes.up("b")  # turn 8 starts at b again
    assert nodes.order() == ["b", "c", "a"]


def test_a_node_down_is_tried_again_once_its_time_is_up() -> None:
    nodes = Nodes(["a", "b"], down_for=0.05)
    nodes.down("a")
    assert nodes.order()[-1] == "a" and nodes.order()[-1] == "a"
    time.sleep(0.06)
    assert set(nodes.order()) == {"a", "b"} and nodes.order()[0] in ("a", "b")
    one = Nodes(["only"])
    one.down("only")
    assert one.order() == ["only"]  # the only node is always tried


def test_a_failed_connection_is_named_without_its_url() -> None:
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError

    from workbench.store.nodes import connection_reason

    refused = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] "
                                       "Connection refused")  # type: ignore[arg-type]
    wrapped = MaxRetryError(None, "http://admin:secret@es:9200/", refused)  # type: ignore[arg-type]
    assert connection_reason(wrapped) == "connection refused"
    assert connection_reason(ConnectTimeoutError("timed out")) == "connection timed out"
    assert connection_reason(OSError("[Errno -2] Name or service not known")) == \
        "host name not found"
    assert connection_reason(ConnectionResetError("Connection reset by peer")) == \
        "connection lost"
    assert connection_reason(ValueError("http://admin:secret@es")) == "ValueError"
