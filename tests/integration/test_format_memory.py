"""What a model's server accepts, remembered in the real Redis (``llm/structured.py``): the
rung every caller starts at, the one probe while nothing is known, and the refusals that move
the start down at once."""

from __future__ import annotations

import threading
import time
import uuid

import redis

from workbench.llm.structured import FormatMemory, Steps, mode

SCHEMA = {"type": "object", "properties": {"ratings": {"type": "array"}}}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}}


def memory(redis_url: str, place: str = "openai http://h/v1 m") -> FormatMemory:
    return FormatMemory(redis.Redis.from_url(redis_url), f"m-{uuid.uuid4().hex[:8]}", place)


def test_a_refusal_moves_every_later_call_below_it(redis_url: str) -> None:
    shared = memory(redis_url)
    assert shared.recall() is None
    with Steps(JSON_SCHEMA, shared, wait=5) as steps:
        asked = []
        for form in steps:
            asked.append(mode(form))
            if mode(form) == "json_schema":
                steps.refused(form)
            else:
                steps.accepted(form)  # a usable answer: the call ends
                break
    assert asked == ["json_schema", "json_object"]
    learnt = shared.recall()
    assert learnt is not None and learnt["mode"] == "json_object"
    assert 86_390 <= learnt["expiresInSeconds"] <= 86_400
    with Steps(JSON_SCHEMA, shared, wait=5) as steps:  # a later call starts there
        assert [mode(form) for form in steps] == ["json_object", "plain"]


def test_an_answered_rung_after_an_outage_teaches_nothing(redis_url: str) -> None:
    shared = memory(redis_url)
    with Steps(JSON_SCHEMA, shared, wait=5) as steps:
        for form in steps:
            if mode(form) == "json_schema":
                steps.to_plain()  # an outage, not the format's fault
            else:
                steps.accepted(form)  # plain answered: says nothing of json_schema
    assert shared.recall() is None


def test_while_nothing_is_known_one_caller_probes_and_the_others_wait(redis_url: str) -> None:
    shared = memory(redis_url)
    other = FormatMemory(redis.Redis.from_url(redis_url), shared.model_id,
                         "openai http://h/v1 m")  # another process, the same model
    prober = Steps(JSON_SCHEMA, shared, wait=5)
    first: list[str] = []

    def waiter() -> None:
        with Steps(JSON_SCHEMA, other, wait=5) as steps:
            first.append(mode(next(iter(steps))))

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)
    assert first == []  # still waiting for the probe
    for form in prober:
        prober.refused(form)  # json_schema refused: the waiter may go on, one rung down
        break
    thread.join(5)
    assert first == ["json_object"]
    prober.close()


def test_a_model_moved_elsewhere_starts_afresh(redis_url: str) -> None:
    shared = memory(redis_url)
    shared.remember("plain")
    moved = FormatMemory(shared.client, shared.model_id, "openai http://elsewhere/v1 m")
    assert moved.recall() is None
