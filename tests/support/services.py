"""Real OpenSearch and Redis (and the remote engines, Solr and the JSON search API) for the tests.

Order of preference: ``OPENSEARCH_URL`` / ``REDIS_URL`` from the environment; testcontainers'
containers where a Docker engine answers; otherwise the project's own scripts
(``scripts/opensearch.sh start``, ``scripts/redis.sh start``), which install and run them locally.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OPENSEARCH_IMAGE = "opensearchproject/opensearch:3.3.0"
REDIS_IMAGE = "redis:7"

_stops: list[Callable[[], None]] = []


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    with suppress(Exception):
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    return False


def _script(name: str, command: str = "start", **env: str) -> str:
    """Run ``scripts/<name> <command>`` (with ``env`` added to the environment) and return the
    URL it prints on its last line."""
    result = subprocess.run(
        [str(REPO / "scripts" / name), command], capture_output=True, text=True, timeout=900,
        env={**os.environ, **env} if env else None,
    )
    if result.returncode != 0:
        raise RuntimeError(f"scripts/{name} {command} failed:\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]


def _started(container: Any, port: int) -> str:
    """Start a testcontainers container (``stop_all`` stops it) and return the ``host:port``
    its ``port`` is published on."""
    container.start()
    _stops.append(container.stop)
    return f"{container.get_container_host_ip()}:{container.get_exposed_port(port)}"


def opensearch_url() -> str:
    if os.environ.get("OPENSEARCH_URL"):
        return os.environ["OPENSEARCH_URL"].rstrip("/")
    if docker_available():
        from testcontainers.opensearch import OpenSearchContainer

        container = OpenSearchContainer(OPENSEARCH_IMAGE, security_enabled=False)
        return f"http://{_started(container, 9200)}"
    return _script("opensearch.sh")


def vector_opensearch_url() -> str:
    """An OpenSearch node with the k-NN and neural-search plugins (knn_vector and sparse_vector
    mappings): ``OPENSEARCH_VECTOR_URL`` when set, else ``OPENSEARCH_PLUGINS=vector
    scripts/opensearch.sh start`` (port 9270), its port, version and heap its own."""
    if os.environ.get("OPENSEARCH_VECTOR_URL"):
        return os.environ["OPENSEARCH_VECTOR_URL"].rstrip("/")
    own = {name: "" for name in ("OPENSEARCH_PORT", "OPENSEARCH_VERSION", "OPENSEARCH_HEAP",
                                 "OPENSEARCH_SECURITY")}
    return _script("opensearch.sh", OPENSEARCH_PLUGINS="vector", **own)


def redis_url() -> str:
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if docker_available():
        from testcontainers.redis import RedisContainer

        return f"redis://{_started(RedisContainer(REDIS_IMAGE), 6379)}/0"
    return _script("redis.sh")


def llama_url() -> str:
    """A real OpenAI-compatible model server (llama.cpp's, ``scripts/llama.sh``):
    ``LLAMA_URL`` when set, else the script installs (the first time builds) and starts it."""
    if os.environ.get("LLAMA_URL"):
        return os.environ["LLAMA_URL"].rstrip("/")
    with _install_finished(os.environ.get("LLAMA_INSTALL_LOCK")):
        return _script("llama.sh")


@contextmanager
def _install_finished(lock_path: str | None) -> Iterator[None]:
    """Once the install holding ``lock_path`` is over, if one is given: CI (``.ci/run``) builds
    llama.cpp's server in the background holding it, and a second install beside it would
    start the same build again. The lock is not passed on to the server ``llama.sh`` starts
    (``subprocess.run`` closes it in the child)."""
    if not lock_path:
        yield
        return
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def solr_url() -> str:
    """A Solr holding the demo catalogue in its core ``products`` (the remote search
    configurations' tests): ``SOLR_URL`` (the base, e.g. ``http://127.0.0.1:8983/solr``) when
    set, else ``scripts/solr.sh load`` builds (once), starts and loads it."""
    if os.environ.get("SOLR_URL"):
        return os.environ["SOLR_URL"].rstrip("/")
    return _script("solr.sh", "load")


def json_search_api_url() -> str:
    """The JSON search API over the demo catalogue (``scripts/json_search_api.py``, with its
    test knobs): ``JSON_SEARCH_API_URL`` when set, else ``scripts/json_search_api.sh start``."""
    if os.environ.get("JSON_SEARCH_API_URL"):
        return os.environ["JSON_SEARCH_API_URL"].rstrip("/")
    return _script("json_search_api.sh")


def stop_all() -> None:
    """Stop containers this session started (local script services keep running for reuse)."""
    while _stops:
        with suppress(Exception):
            _stops.pop()()


def forget_formats(redis_url: str) -> None:
    """Delete every remembered structured-output mode (``workbench:format:*``), so a test's
    LLM calls start at the top of the ladder; nothing to do where Redis is not reachable
    (unit tests point it at a closed port)."""
    import redis

    with suppress(redis.RedisError):
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=1)
        keys = list(client.scan_iter("workbench:format:*", count=1000))
        if keys:
            client.delete(*keys)
