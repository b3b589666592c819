"""The HAProxy front (``WORKBENCH_FRONT=haproxy``): what it routes where, its configuration, and
its life cycle. Pass-through parity itself is covered by running the pass-through, wire and fault
tests against both fronts (``FRONTS`` in ``tests/support/processes.py``)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import urllib3

from tests.support.api import Api
from tests.support.processes import Server
from tests.support.raw_http import send
from workbench.config import Config, ConfigError
from workbench.serving import haproxy
from workbench.serving.front import chosen_front, find_haproxy, workbench_prefixes

http = urllib3.PoolManager(retries=False, timeout=60)


@pytest.fixture(scope="module")
def fronted(env: dict[str, str]) -> Iterator[Server]:
    srv = Server(env, front="haproxy")
    yield srv
    srv.stop()


def test_haproxy_is_installed_for_the_suite() -> None:
    # scripts/test.sh installs haproxy; without it the front tests would test nothing.
    assert find_haproxy() is not None


def test_srw_routes_reach_the_workbench_through_the_front(fronted: Server) -> None:
    api = Api(fronted.url)
    created = api.srw("PUT", "/query_sets", {"name": "front set", "description": "via haproxy",
                                             "sampling": "manual",
                                             "querySetQueries": [{"queryText": "red shoe"}]})
    assert created.status == 200, created.data
    set_id = created.json["query_set_id"]
    got = api.srw("GET", f"/query_sets/{set_id}").json["hits"]["hits"][0]["_source"]
    assert got["querySetQueries"] == [{"queryText": "red shoe", "customFields": {}}]
    # An unknown SRW path is the workbench's 404 envelope, never the cluster's.
    api.srw("GET", "/no_such_route").error(
        404, "no handler found for uri [/_plugins/_search_relevance/no_such_route] and method "
             "[GET]", "resource_not_found_exception")
    assert api.srw("DELETE", f"/query_sets/{set_id}").status == 200


def test_intercepted_cluster_settings_even_with_doubled_slashes(fronted: Server) -> None:
    """``//_cluster/settings`` is the settings route for Flask; HAProxy must route it the same."""
    api = Api(fronted.url)
    for path in ("/_cluster/settings", "//_cluster/settings"):
        reply = api.call("GET", path, params={"include_defaults": "true", "flat_settings": "true"})
        assert reply.status == 200
        defaults = reply.json["defaults"]
        # Only the workbench adds the plugin's settings; the cluster has no such plugin.
        assert "plugins.search_relevance.workbench_enabled" in defaults, path


def test_other_methods_and_chunked_bodies_go_to_the_workbench(fronted: Server,
                                                              index_name: str) -> None:
    odd = http.request("PROPFIND", fronted.url + "/anything")
    assert odd.status == 405
    assert json.loads(odd.data)["status"] == 405

    def chunks() -> Iterator[bytes]:
        yield b'{"index":{}}\n'
        yield b'{"a":1}\n'
    reply = http.request("POST", f"{fronted.url}/{index_name}/_bulk?refresh=true", body=chunks(),
                         chunked=True, headers={"Content-Type": "application/x-ndjson"})
    assert reply.status == 200
    assert json.loads(reply.data)["items"][0]["index"]["result"] == "created"


def test_direct_requests_are_logged_once(fronted: Server) -> None:
    marker = f"/front-log-marker-{time.monotonic_ns()}"
    assert http.request("HEAD", fronted.url + marker).status == 404  # the cluster's: no index
    deadline = time.monotonic() + 10
    while marker not in fronted.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert fronted.log().count(marker) == 1


def test_stopping_the_front_stops_haproxy_and_gunicorn(env: dict[str, str]) -> None:
    srv = Server(env, front="haproxy", workers=1)
    children = psutil.Process(srv.pid).children(recursive=True)
    names = {c.name() for c in children}
    assert any("haproxy" in n for n in names), names
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(60) == 0
    _gone, alive = psutil.wait_procs(children, timeout=30)
    assert alive == []
    srv.stop()


@pytest.mark.parametrize(("which", "message"), [
    ("workbench.cli", "the API server exited"),
    ("haproxy", "haproxy exited"),
])
def test_the_front_exits_when_one_of_its_processes_dies(env: dict[str, str], which: str,
                                                       message: str) -> None:
    srv = Server(env, front="haproxy", workers=1)
    process = psutil.Process(srv.pid)
    victim = next(c for c in process.children() if which in " ".join(c.cmdline()))
    others = [c for c in process.children(recursive=True) if c.pid != victim.pid]
    victim.kill()
    assert srv.proc.wait(60) != 0
    assert message in srv.log()
    _gone, alive = psutil.wait_procs(others, timeout=30)
    assert alive == []
    srv.stop()


def test_front_setting_is_validated() -> None:
    with pytest.raises(ConfigError, match="WORKBENCH_FRONT: expected auto, haproxy or none"):
        Config.from_env({"WORKBENCH_FRONT": "apache"})
    assert chosen_front(Config.from_env({"WORKBENCH_FRONT": "none"})) is None
    assert chosen_front(Config.from_env({"WORKBENCH_FRONT": "auto"})) == find_haproxy()
    # The former front's name still starts the front it was replaced by.
    assert chosen_front(Config.from_env({"WORKBENCH_FRONT": "nginx"})) == find_haproxy()


# workbench_prefixes builds the app, which points this process's Celery app at the config's
# broker and queue: always the session's own (env), or later tests' jobs go where no worker is.


def test_prefixes_come_from_the_app(env: dict[str, str]) -> None:
    assert workbench_prefixes(Config.from_env(env)) == (
        "/_cluster/settings", "/_plugins/_ml/models/", "/_plugins/_search_relevance",
        "/_plugins/ubi/initialize",
    )


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9200",
    "https://user:pa$s'w\\d@localhost:9443/os%25",
])
def test_rendered_configuration_is_valid_haproxy(tmp_path: Path, url: str,
                                                env: dict[str, str]) -> None:
    config = Config.from_env(dict(env, OPENSEARCH_URL=url, OPENSEARCH_VERIFY_CERTS="false"))
    conf = haproxy.write(config, 12345, workbench_prefixes(config), tmp_path)
    text = conf.read_text()
    binary = find_haproxy()
    assert binary
    check = subprocess.run([binary, "-c", "-f", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    if url.startswith("https"):
        assert "http-request set-path /os%%25%[path]" in text
        assert "ssl sni str(localhost) verify none" in text
        assert "pa$s" not in text  # the front never holds the cluster's credentials


def test_haproxy_without_the_api_answers_503(tmp_path: Path, env: dict[str, str]) -> None:
    """An SRW route whose gunicorn is not answering gets the workbench's 503 envelope."""
    from tests.support.processes import free_port

    port = free_port()
    config = Config.from_env(dict(env, WORKBENCH_PORT=str(port), WORKBENCH_HOST="127.0.0.1"))
    conf = haproxy.write(config, free_port(), workbench_prefixes(config), tmp_path)
    binary = find_haproxy()
    assert binary
    proc = subprocess.Popen([binary, "-db", "-f", str(conf)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                reply = send(f"http://127.0.0.1:{port}", "GET", "/_plugins/_search_relevance/x")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert reply.status == 503
        assert reply.json == {
            "error": {"root_cause": [{"type": "workbench_unavailable_exception",
                                      "reason": "the workbench API is not answering"}],
                      "type": "workbench_unavailable_exception",
                      "reason": "the workbench API is not answering"},
            "status": 503,
        }
    finally:
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(10) == 0
