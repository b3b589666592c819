"""Tests here run against the real OpenSearch and Redis (``tests/conftest.py``): every session
starts from the default SRW settings and zeroed counters."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _clean_plugin_state(_default_plugin_settings: None) -> None:
    return None
