"""Session fixtures: a real OpenSearch, a real Redis, the workbench API and a Celery worker.

See ``tests/support/services.py`` for where the services come from.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opensearchpy import OpenSearch

from tests.support import services
from tests.support.processes import Server, Worker, base_env


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    return services.opensearch_url()


@pytest.fixture(scope="session")
def redis_url() -> str:
    return services.redis_url()


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield
    services.stop_all()


@pytest.fixture(scope="session")
def queue_name() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def env(opensearch_url: str, redis_url: str, queue_name: str) -> dict[str, str]:
    """Environment for workbench subprocesses of this session."""
    return base_env(opensearch_url, redis_url, WORKBENCH_QUEUE=queue_name)


@pytest.fixture(scope="session")
def server(env: dict[str, str]) -> Iterator[Server]:
    """The workbench API (gunicorn, 2 workers) in front of the real cluster."""
    srv = Server(env)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def worker(env: dict[str, str]) -> Iterator[Worker]:
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


@pytest.fixture
def index_name(direct: OpenSearch) -> Iterator[str]:
    """A fresh index name, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    direct.indices.delete(index=f"{name}*", ignore=[404], expand_wildcards="all")
