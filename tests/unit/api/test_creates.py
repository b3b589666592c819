"""workbench/api/creates.py without services: keys, derived ids, fingerprints, and which failed
connections prove that a create never reached the cluster."""

from __future__ import annotations

import pytest
import urllib3.exceptions
from flask import Flask
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout as OpenSearchConnectionTimeout

from workbench.api import creates
from workbench.errors import BadRequest


def test_keys_are_1_to_255_printable_ascii_characters() -> None:
    app = Flask("t")
    for good in ("a", "~" * 255, "8e03978e-40d5-43e8-bc93-6894a57f9324", "a b"):
        with app.test_request_context(headers={creates.HEADER: good}):
            assert creates.idempotency_key() == good
    with app.test_request_context():
        assert creates.idempotency_key() is None
    for bad in ("", "k" * 256, "caf\xe9", "a\x7f"):
        with app.test_request_context(headers={creates.HEADER: bad}), \
                pytest.raises(BadRequest, match=r"^Idempotency-Key header must be 1 to 255"):
            creates.idempotency_key()


def test_derived_ids_depend_on_kind_user_and_key() -> None:
    one = creates.derived_id(creates.JUDGMENT, "", "k")
    assert one == creates.derived_id(creates.JUDGMENT, "", "k")
    others = {creates.derived_id(creates.EXPERIMENT, "", "k"),
              creates.derived_id(creates.JUDGMENT, "alice", "k"),
              creates.derived_id(creates.JUDGMENT, "", "k2")}
    assert one not in others and len(others) == 3


def test_the_fingerprint_is_of_canonical_json() -> None:
    assert creates.fingerprint({"a": 1, "b": [1, "é"]}) == creates.fingerprint(
        {"b": [1, "é"], "a": 1})
    assert creates.fingerprint({"a": 1}) != creates.fingerprint({"a": 1.5})


def test_only_a_connection_never_made_proves_nothing_was_sent() -> None:
    refused = urllib3.exceptions.NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
    connect_timeout = urllib3.exceptions.ConnectTimeoutError("connect timed out")
    read_timeout = urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")  # type: ignore[arg-type]
    dropped = urllib3.exceptions.ProtocolError("Connection aborted", ConnectionResetError())
    assert creates.never_sent(OpenSearchConnectionError("N/A", "refused", refused))
    assert creates.never_sent(OpenSearchConnectionError("N/A", "timeout", connect_timeout))
    assert not creates.never_sent(OpenSearchConnectionTimeout("TIMEOUT", "read", read_timeout))
    assert not creates.never_sent(OpenSearchConnectionError("N/A", "dropped", dropped))
    assert not creates.never_sent(OpenSearchConnectionError("N/A", "unknown", "no cause"))
