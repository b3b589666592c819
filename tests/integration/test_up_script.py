"""``scripts/up.sh`` as a newcomer runs it: the workbench starts, and a model with an API key can
be stored at once, because the script generates ``WORKBENCH_SECRET_KEY`` on its first start and
keeps it under ``$WORKBENCH_HOME`` (mode 0600) for the next ones.

The script is given the test's OpenSearch and Redis (``OPENSEARCH_URL``/``REDIS_URL``, as the
README says for a cluster you already have), a ``WORKBENCH_HOME`` and a port of its own, and a
queue of its own, so what it starts touches nothing of the other tests; ``scripts/down.sh``
stops it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet
from opensearchpy import OpenSearch

from tests.support.doc_examples import REPO
from tests.support.processes import free_port
from workbench.store.indices import MODELS_INDEX


@pytest.fixture
def up_env(tmp_path: Path, opensearch_url: str, redis_url: str) -> Iterator[dict[str, str]]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("WORKBENCH_")}
    env.update(WORKBENCH_HOME=str(tmp_path / "home"), OPENSEARCH_URL=opensearch_url,
               REDIS_URL=redis_url, WORKBENCH_PORT=str(free_port()), WORKBENCH_FRONT="none",
               WORKBENCH_QUEUE=f"up-{uuid.uuid4().hex[:8]}")
    yield env
    subprocess.run([str(REPO / "scripts" / "down.sh")], env=env, capture_output=True,
                   timeout=120)


def _up(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(REPO / "scripts" / "up.sh")], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_up_generates_a_secret_key_once_so_a_keyed_model_is_stored_at_once(
        up_env: dict[str, str], direct: OpenSearch) -> None:
    first = _up(up_env)
    url = f"http://127.0.0.1:{up_env['WORKBENCH_PORT']}"
    assert first.stdout.strip() == url
    key_file = Path(up_env["WORKBENCH_HOME"]) / "secret_key"
    assert f"generated WORKBENCH_SECRET_KEY in {key_file} (mode 0600)" in first.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    Fernet(key.encode())  # a valid key
    assert key not in first.stdout + first.stderr  # never printed

    model_id = f"up-{uuid.uuid4().hex[:8]}"
    secret = "sk-proj-up-script-0123456789"
    try:
        reply = requests.put(f"{url}/_plugins/_search_relevance/models", timeout=30, json={
            "id": model_id, "provider": "openai", "endpoint": "https://api.openai.com/v1",
            "model": "gpt-4o-mini", "apiKey": secret})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"model_id": model_id, "result": "created"}
        stored = direct.get(index=MODELS_INDEX, id=model_id)["_source"]
        assert secret not in str(stored)  # encrypted with the generated key
        shown = requests.get(f"{url}/_plugins/_search_relevance/models/{model_id}", timeout=30)
        assert shown.json()["apiKeySet"] is True and secret not in shown.text

        # Stopped and started again: the same key, not a new one (stored keys stay readable).
        subprocess.run([str(REPO / "scripts" / "down.sh")], env=up_env, check=True,
                       capture_output=True, timeout=120)
        again = _up(up_env)
        assert "generated WORKBENCH_SECRET_KEY" not in again.stderr
        assert key_file.read_text().strip() == key
    finally:
        direct.delete(index=MODELS_INDEX, id=model_id, ignore=[404], refresh=True)


def test_a_secret_key_given_wins_and_nothing_is_generated(up_env: dict[str, str]) -> None:
    given = Fernet.generate_key().decode()
    result = _up(dict(up_env, WORKBENCH_SECRET_KEY=given))
    assert "generated WORKBENCH_SECRET_KEY" not in result.stderr
    assert not (Path(up_env["WORKBENCH_HOME"]) / "secret_key").exists()
