"""Session fixtures: a real OpenSearch, a real Redis, the workbench API and a Celery worker.

See ``tests/support/services.py`` for where the services come from. They are started only for
the tests that ask for them: ``tests/unit`` needs none and passes with OpenSearch and Redis
unreachable; ``tests/integration`` and ``tests/compat`` start every session from the default
SRW settings (their ``conftest.py``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support import secure_cluster as secure
from tests.support import services
from tests.support.api import Api
from tests.support.data import ESCI
from tests.support.processes import Server, Worker, base_env
from workbench.bench.llm_server import LLMServer


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    return services.opensearch_url()


@pytest.fixture(scope="session")
def redis_url() -> str:
    return services.redis_url()


@pytest.fixture(scope="session")
def secure_cluster() -> secure.SecureCluster:
    """The secured node (security plugin, demo configuration), its users, roles and indices
    ``wb-sec-a``/``wb-sec-b``: see ``tests/support/secure_cluster.py``."""
    return secure.secure_cluster()


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield
    services.stop_all()


@pytest.fixture(scope="session")
def queue_name() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


LLM_KEY = "sk-test-do-not-leak-4f9a"
JUDGE_MODEL = "test-judge"


@pytest.fixture(scope="session")
def llm_server() -> Iterator[LLMServer]:
    """The stand-in LLM provider (OpenAI chat completions and ML Commons ``_predict`` shapes)."""
    with LLMServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama_url() -> str:
    """The base URL (``.../v1``) of a real llama.cpp server serving SmolLM2-135M-Instruct."""
    return services.llama_url()


@pytest.fixture
def llm(llm_server: LLMServer, redis_url: str) -> Iterator[LLMServer]:
    """The LLM server with a clean script and request log for one test, and no structured-
    output mode remembered for any model (``llm/structured.py``): each test's calls start at
    the top of the ladder. Reset again afterwards: a test that scripts failures
    (``llm.fail(500, times=1000)``) must not leave them to a later test that does not ask for
    this fixture but calls the same server (test_mustache_configurations' LLM judgment did)."""
    llm_server.reset()
    services.forget_formats(redis_url)
    yield llm_server
    llm_server.reset()


@pytest.fixture(scope="session")
def env(opensearch_url: str, redis_url: str, queue_name: str,
        llm_server: LLMServer) -> dict[str, str]:
    """Environment for workbench subprocesses of this session: services, a queue of its own,
    and one registered LLM model served by the stand-in server."""
    models = [{"id": JUDGE_MODEL, "name": "Test judge", "provider": "openai",
               "base_url": llm_server.openai_base_url, "model": "judge-1",
               "api_key_env": "TEST_LLM_KEY"}]
    return base_env(opensearch_url, redis_url, WORKBENCH_QUEUE=queue_name,
                    WORKBENCH_MODELS=json.dumps(models), TEST_LLM_KEY=LLM_KEY,
                    WORKBENCH_LLM_CONCURRENCY="4", WORKBENCH_LLM_MAX_RETRIES="2")


@pytest.fixture(scope="session")
def server(env: dict[str, str]) -> Iterator[Server]:
    """The workbench API (gunicorn, 2 workers) in front of the real cluster."""
    srv = Server(env)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def celery(env: dict[str, str]) -> Any:
    """The test process's Celery app, sending to this session's broker and queue."""
    from workbench.config import Config
    from workbench.jobs.celery_app import configure

    return configure(Config.from_env(env))


@pytest.fixture(scope="session")
def worker(env: dict[str, str], celery: Any) -> Iterator[Worker]:
    """A real Celery worker consuming this session's queue."""
    wrk = Worker(env)
    yield wrk
    wrk.stop()


@pytest.fixture(scope="session")
def direct(opensearch_url: str) -> OpenSearch:
    """opensearch-py talking to the cluster itself, for reference answers."""
    return OpenSearch(hosts=[opensearch_url], timeout=120)


@pytest.fixture(scope="session")
def client(server: Server) -> OpenSearch:
    """The unmodified opensearch-py client pointed at the workbench."""
    return OpenSearch(hosts=[server.url], timeout=120)


@pytest.fixture(scope="session")
def _default_plugin_settings(opensearch_url: str, redis_url: str) -> None:
    """Start every session from the default SRW settings and zeroed counters."""
    import redis

    from workbench.store.plugin_settings import DOC_ID, SETTINGS_INDEX

    OpenSearch(hosts=[opensearch_url]).delete(index=SETTINGS_INDEX, id=DOC_ID, ignore=[404])
    stats = redis.Redis.from_url(redis_url)
    for key in stats.scan_iter("workbench:stats:*"):
        stats.delete(key)


@pytest.fixture(scope="session")
def api(server: Server) -> Api:
    """Raw HTTP to the workbench."""
    return Api(server.url)


@pytest.fixture(scope="session")
def srw_client(client: OpenSearch) -> Any:
    """opensearch-py's own ``plugins.search_relevance`` namespace, unmodified."""
    return client.plugins.search_relevance


@pytest.fixture(scope="session")
def ubi_data(direct: OpenSearch, env: dict[str, str]) -> None:
    """The ESCI UBI queries and events in ``ubi_queries``/``ubi_events`` (idempotent load)."""
    load_ubi(env)


def load_ubi(env: dict[str, str]) -> None:
    from workbench.config import Config
    from workbench.demo.load import load_demo

    load_demo(Config.from_env(env), None, "", str(ESCI / "ubi_queries_events.ndjson"))


@pytest.fixture
def index_name(direct: OpenSearch) -> Iterator[str]:
    """A fresh index name, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    direct.indices.delete(index=f"{name}*", ignore=[404], expand_wildcards="all")
