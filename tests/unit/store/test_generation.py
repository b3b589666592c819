"""The caches' generation number when Redis cannot give it (store/generation.py)."""

from __future__ import annotations

import time

import pytest

from workbench.config import Config
from workbench.store import generation


@pytest.fixture(autouse=True)
def _fresh() -> None:
    generation._retry_at = 0.0


def test_unreachable_redis_gives_no_number_and_is_not_asked_again_at_once() -> None:
    # nothing listens: refused
    unreachable = generation.client(Config(redis_url="redis://127.0.0.1:1/0"))
    assert generation.read(unreachable) is None
    asked: list[str] = []

    class Counting:
        def get(self, key: str) -> bytes:
            asked.append(key)
            return b"7"

    assert generation.read(Counting()) is None  # type: ignore[arg-type]
    assert asked == []
    generation._retry_at = time.monotonic() - 1  # the interval has passed
    assert generation.read(Counting()) == b"7"  # type: ignore[arg-type]
    assert asked == [generation.CACHE_GENERATION_KEY]


def test_a_bump_redis_cannot_take_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    generation.bump(generation.client(Config(redis_url="redis://127.0.0.1:1/0")))
    assert "could not tell the API processes" in caplog.text
