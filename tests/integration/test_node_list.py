"""``OPENSEARCH_URL`` as a list of nodes: refused with a message naming the bad entry before
anything starts, a start that fails late leaves no process, and a node that does not answer is
passed over by every path to the cluster (the fronts, the API's and the workers' client, the CLI).
The loss of a node of a real cluster mid-job is ``test_cluster_failover.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.support.api import Api
from tests.support.processes import FRONTS, REPO, Server, Worker, base_env, free_port, stop_together
from tests.support.waiting import finished

#: a loopback port nothing listens on: a node that is down
DEAD = "http://127.0.0.1:9"


def in_session(session: int) -> list[psutil.Process]:
    """The processes of a session (a command started in a session of its own, and what it
    started)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == session:
                found.append(process)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def run_cli(env: dict[str, str], *args: str,
            timeout: float = 120) -> tuple[int, str, list[psutil.Process]]:
    """A workbench command in a session of its own: its exit status, its output, and what it
    left running."""
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output, _ = proc.communicate(timeout=timeout)
    time.sleep(0.5)
    return proc.returncode, output, in_session(proc.pid)


@pytest.mark.parametrize("command", ["serve", "worker", "status", "init-indices", "config"])
@pytest.mark.parametrize("url, message", [
    ("http://127.0.0.1:9501,http://127.0.0.1:95o2",
     "entry 2 ('http://127.0.0.1:95o2') has a port that is not a number from 0 to 65535"),
    ("http://127.0.0.1:9501,https://127.0.0.1:9502",
     "entry 2 ('https://127.0.0.1:9502') uses https where entry 1 uses http: the nodes of one "
     "cluster share a scheme"),
    ("http://127.0.0.1:9501;http://127.0.0.1:9502",
     "'http://127.0.0.1:9501;http://127.0.0.1:9502' is not one node URL: separate the nodes "
     "with commas, not semicolons"),
])
def test_a_bad_node_list_stops_every_command_before_it_starts(
        redis_url: str, command: str, url: str, message: str) -> None:
    env = base_env(url, redis_url, WORKBENCH_PORT=str(free_port()))
    status, output, left = run_cli(env, command, timeout=60)
    assert (status, output.strip()) == (2, f"workbench: configuration error: OPENSEARCH_URL: "
                                           f"{message}")
    assert left == []


def test_a_start_that_fails_late_leaves_no_process(redis_url: str, tmp_path: Path) -> None:
    """The API starts, then HAProxy refuses its configuration (a CA file that is not there):
    ``serve`` stops what it started and exits non-zero."""
    env = base_env("https://localhost:9,https://localhost:10", redis_url,
                   WORKBENCH_PORT=str(free_port()), WORKBENCH_FRONT="haproxy",
                   OPENSEARCH_CA_CERTS=str(tmp_path / "missing-ca.pem"))
    status, output, left = run_cli(env, "serve")
    assert status != 0 and "haproxy exited with status" in output, output
    assert left == [], [p.cmdline() for p in left]


@pytest.mark.parametrize("front", FRONTS)
def test_a_node_that_is_down_is_passed_over(opensearch_url: str, redis_url: str,
                                            front: str) -> None:
    """The first node listed does not answer: pass-through searches, SRW routes and a job
    go to the other, every time."""
    env = base_env(f"{DEAD},{opensearch_url}", redis_url,
                   WORKBENCH_QUEUE=f"test-nodes-{uuid.uuid4().hex[:8]}")
    server, worker = Server(env, workers=1, front=front), Worker(env)
    try:
        api = Api(server.url)
        for _ in range(6):  # round robin would give the dead node every other request
            assert api.call("GET", "/_cluster/health").status == 200
            assert api.srw("GET", "/judgments?size=1").status == 200
        reply = api.srw("PUT", "/judgments", {"name": f"n-{uuid.uuid4().hex[:6]}",
                                              "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "q", "ratings": [{"docId": "d", "rating": "1"}]}]})
        assert reply.status == 200, reply.data
        done = finished(api, f"/judgments/{reply.json['judgment_id']}", 60)
        assert done["status"] == "COMPLETED"
    finally:
        stop_together([worker, server])


def test_status_and_init_indices_use_the_node_that_answers(opensearch_url: str,
                                                           redis_url: str) -> None:
    env = base_env(f"{DEAD},{opensearch_url}", redis_url)
    status, output, _ = run_cli(env, "init-indices")
    assert status == 0, output
    # the dead node named in one line, then left out: no traceback, no second failure
    lines = output.splitlines()
    assert "created: nothing (all indices exist)" in lines, output
    failures = [line for line in lines if "workbench.store.client" in line]
    assert len(failures) == 1 and re.search(
        rf"WARNING \[\d+\] workbench\.store\.client: OpenSearch node {DEAD} failed [A-Z]+ /\S+ "
        r"after \d\.\d{3}s: connection refused$", failures[0]), output
    assert "Traceback" not in output
    assert any(line.endswith(f"Connection <FailoverConnection: {DEAD}> has failed for 1 times "
                             "in a row, putting on 10 second timeout.") for line in lines), output
    status, output, _ = run_cli(env, "status")
    assert f"{DEAD}, {opensearch_url} (OpenSearch " in output, output
