"""The command line against a workbench in front of the secured node: credentials from options,
the environment or a whole Authorization header reach the cluster as the user's; none or wrong
ones are a clear exit 2; the password is never printed."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import REPO, Server, base_env
from tests.support.secure_cluster import SecureCluster


@pytest.fixture(scope="module")
def sec_server(secure_cluster: SecureCluster, redis_url: str) -> Iterator[Server]:
    sec = secure_cluster
    env = base_env(sec.url, redis_url, WORKBENCH_QUEUE=f"test-cli-sec-{uuid.uuid4().hex[:8]}",
                   OPENSEARCH_USERNAME="workbench", OPENSEARCH_PASSWORD=sec.password("workbench"),
                   **({"OPENSEARCH_CA_CERTS": sec.ca_certs} if sec.ca_certs
                      else {"OPENSEARCH_VERIFY_CERTS": "false"}))
    srv = Server(env, workers=1, wait_cluster=False)
    yield srv
    srv.stop()


def create_query_set(server: Server, tmp: str, *args: str, **env: str
                     ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in base_env("", "").items() if not k.startswith("WORKBENCH_")}
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", "query-set", "create", tmp, "--name",
         f"cli-sec-{uuid.uuid4().hex[:6]}", "--url", server.url, *args],
        env=dict(clean, **env), capture_output=True, text=True, timeout=120, cwd=REPO)


def test_credentials_from_options_environment_or_header(
        sec_server: Server, secure_cluster: SecureCluster, tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("apple\nbanana\n")
    password = secure_cluster.password("alice")
    header = "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    for args, env in ((["--user", "alice", "--password", password], {}),
                      ([], {"WORKBENCH_USER": "alice", "WORKBENCH_PASSWORD": password}),
                      ([], {"WORKBENCH_AUTHORIZATION": header})):
        result = create_query_set(sec_server, str(path), *args, **env)
        assert result.returncode == 0, result.stderr
        assert len(result.stdout.strip()) == 36
        assert password not in result.stdout + result.stderr

    anonymous = create_query_set(sec_server, str(path))
    assert anonymous.returncode == 2
    assert "answered 401" in anonymous.stderr
    wrong = create_query_set(sec_server, str(path), "--user", "alice", "--password", "nope-123")
    assert wrong.returncode == 2 and "answered 401" in wrong.stderr
    assert "nope-123" not in wrong.stdout + wrong.stderr
