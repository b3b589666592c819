"""A real OpenSearch cluster of several nodes on this machine, for the failover tests.

``Cluster(3).start()`` runs three nodes of the distribution ``scripts/opensearch.sh`` downloads
(it is asked to start the plain node first, which fetches it), each a child process with a small
heap, its own data folder and ports 9501.. (HTTP) and 9601.. (transport), all eligible as cluster
manager, so losing any one keeps a quorum. ``kill(n)`` sends SIGKILL to node n, as a crash
does, and ``restart(n)`` starts it again on its data; ``stop()`` ends every node and removes
the data. As root, the nodes run as the user ``wbsearch`` (OpenSearch refuses root), as the
script does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.services import REPO, opensearch_url

NODE_USER = "wbsearch"


def _distribution() -> Path:
    """The OpenSearch the plain node runs (``scripts/opensearch.sh`` downloaded it)."""
    opensearch_url()  # started, so downloaded
    home = Path(os.environ.get("WORKBENCH_HOME", "/var/lib/workbench"))
    found = sorted((home / "opensearch" / "dist").glob("opensearch-*/bin/opensearch"))
    if not found:
        raise RuntimeError(f"no OpenSearch distribution under {home}/opensearch/dist")
    return found[-1].parents[1]


def _jdk() -> str:
    """The JDK with the highest version under /usr/lib/jvm, as scripts/opensearch.sh picks it."""
    best, best_major = "", 0
    for folder in Path("/usr/lib/jvm").iterdir():
        release = folder / "release"
        if not (folder / "bin" / "java").exists() or not release.exists():
            continue
        for line in release.read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                major = int(line.split('"')[1].split(".")[0])
                if major > best_major:
                    best, best_major = str(folder), major
    if not best:
        raise RuntimeError("no JDK under /usr/lib/jvm")
    return best


class Cluster:
    def __init__(self, nodes: int = 3, heap: str = "512m", first_port: int = 9501) -> None:
        self.count = nodes
        self.heap = heap
        self.ports = [first_port + n for n in range(nodes)]
        self.urls = [f"http://127.0.0.1:{port}" for port in self.ports]
        self.home = Path(tempfile.mkdtemp(prefix="wb-cluster-"))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.killed: set[int] = set()
        self.commands: dict[int, tuple[list[str], dict[str, str]]] = {}
        self.name = f"wb-cluster-{os.getpid()}"

    @property
    def opensearch_url(self) -> str:
        """Every node, the first first: the workbench's OPENSEARCH_URL."""
        return ",".join(self.urls)

    def start(self, timeout: float = 240) -> Cluster:
        dist, jdk = _distribution(), _jdk()
        root = os.geteuid() == 0
        if root:
            shutil.chown(self.home, NODE_USER)
        transports = ",".join(f"127.0.0.1:{port + 100}" for port in self.ports)
        managers = ",".join(f"n{n + 1}" for n in range(self.count))
        for number, port in enumerate(self.ports, 1):
            folder = self.home / f"n{number}"
            for sub in ("data", "logs"):
                (folder / sub).mkdir(parents=True)
                if root:
                    shutil.chown(folder / sub, NODE_USER)
            if root:
                shutil.chown(folder, NODE_USER)
            command = [
                str(dist / "bin" / "opensearch"),
                f"-Ecluster.name={self.name}", f"-Enode.name=n{number}",
                "-Enetwork.host=127.0.0.1", f"-Ehttp.port={port}",
                f"-Etransport.port={port + 100}", f"-Ediscovery.seed_hosts={transports}",
                f"-Ecluster.initial_cluster_manager_nodes={managers}",
                f"-Epath.data={folder / 'data'}", f"-Epath.logs={folder / 'logs'}",
                "-Ecluster.routing.allocation.disk.threshold_enabled=false",
                "-Eindices.breaker.total.use_real_memory=false",
            ]
            env = dict(os.environ, OPENSEARCH_JAVA_HOME=jdk,
                       OPENSEARCH_JAVA_OPTS=f"-Xms{self.heap} -Xmx{self.heap}")
            if root:
                command = ["runuser", "-u", NODE_USER, "--", *command]
            self.commands[number] = (command, env)
            self._run(number)
        self.wait_for_nodes(self.count, timeout)
        return self

    def _run(self, number: int) -> None:
        command, env = self.commands[number]
        with (self.home / f"n{number}" / "console.log").open("ab") as log:
            self.procs[number] = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)

    def restart(self, number: int, timeout: float = 240) -> None:
        """Start node ``number`` again (after ``kill``) on its data, and wait until it answers
        HTTP and the cluster has every node again and is green."""
        self._run(number)
        self.killed.discard(number)
        deadline = time.monotonic() + timeout
        while self.health(self.urls[number - 1]) is None:
            if self.procs[number].poll() is not None:
                raise RuntimeError(f"node n{number} exited: see {self.home}/n{number}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"node n{number} did not answer in {timeout:g}s")
            time.sleep(1)
        self.wait_for_nodes(self.count, max(1.0, deadline - time.monotonic()), green=True)

    def health(self, url: str | None = None) -> dict[str, object] | None:
        try:
            with urllib.request.urlopen(f"{url or self.live_url()}/_cluster/health",
                                        timeout=3) as reply:
                answer: dict[str, object] = json.loads(reply.read())
                return answer
        except OSError:
            return None

    def live_url(self) -> str:
        return next(self.urls[n - 1] for n in sorted(self.procs)
                    if self.procs[n].poll() is None)

    def wait_for_nodes(self, count: int, timeout: float = 240, green: bool = False) -> None:
        """Until the cluster has ``count`` nodes and is green (or, unless ``green``, yellow:
        replicas moving)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for number, proc in self.procs.items():
                if proc.poll() is not None and number not in self.killed:
                    raise RuntimeError(f"node n{number} exited: see {self.home}/n{number}")
            state = self.health()
            if state and state.get("number_of_nodes") == count and \
                    state.get("status") in (("green",) if green else ("green", "yellow")):
                return
            time.sleep(1)
        raise RuntimeError(f"the cluster did not reach {count} nodes in {timeout:g}s")

    def kill(self, number: int) -> None:
        """SIGKILL node ``number`` (from 1), as a crash or the OOM killer does."""
        proc = self.procs[number]
        self.killed.add(number)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)
