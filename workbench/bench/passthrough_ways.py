"""The ways of serving the workbench that the pass-through benchmark compares with direct.

Each way is a ``WORKBENCH_FRONT`` value and the processes that must then hold the port. A way is
measured only when this tree's ``workbench serve`` starts with it and runs those processes: a
value the configuration refuses, or one it reads as another front (``nginx`` became a name for
HAProxy in issue 22), is skipped with a note, so the benchmark follows what is installed.

Door + nginx, the front HAProxy replaced, stays measurable after its removal: it is served from
the last commit whose tree still holds ``workbench/serving/door.py`` (``git archive``), so the
"at least 1.3x door + nginx" target of issue 22 is measured in the same run as HAProxy.

Beside them runs a reference that is not the workbench: a bare HAProxy (``bare_haproxy``) in
``mode http`` with no rule and no log, one thread as the front has on 2 cores, in front of the
cluster. Its ratio to direct is what any HTTP proxy on the same cores costs, so the front's own
share is the gap between the two.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from workbench.bench.common import REPO, Bench
from workbench.bench.processes import Proc, free_port
from workbench.serving.front import find_haproxy, listening
from workbench.serving.haproxy import MAXCONN, threads

OLD_FRONT = "workbench/serving/door.py"  # in a tree that still serves door + nginx
BARE = "bare haproxy"
BARE_DESCRIBED = ("a bare HAProxy in front of the cluster, not the workbench (mode http, no rule, "
                  "no log, {threads} thread): the bound of any HTTP proxy on these cores")
BARE_CONFIG = """\
global
    maxconn {maxconn}
    nbthread {threads}
defaults
    mode http
    option http-keep-alive
    timeout connect 10s
    timeout client 60s
    timeout server 60s
frontend bare
    bind 127.0.0.1:{port}
    default_backend cluster
backend cluster
    http-reuse safe
    server node {node}
"""


@dataclass(frozen=True)
class Way:
    """One way of serving: its row name, description, environment and processes."""

    name: str
    described: str
    env: dict[str, str]
    needs: tuple[str, ...] = ()  # each must appear in some process's command line
    refuses: tuple[str, ...] = ()  # none may appear


WAYS = (
    Way("haproxy", "HAProxy front (WORKBENCH_FRONT=haproxy)", {"WORKBENCH_FRONT": "haproxy"},
        needs=("haproxy",)),
    Way("gunicorn", "gunicorn alone (WORKBENCH_FRONT=none)", {"WORKBENCH_FRONT": "none"},
        refuses=("haproxy", "nginx")),
    Way("door + nginx", "door and nginx front (WORKBENCH_FRONT=nginx)",
        {"WORKBENCH_FRONT": "nginx"}, needs=("nginx", "workbench.serving.door")),
)


@dataclass
class Served:
    """The ways that came up (name to base URL, and to description) and notes on the rest."""

    urls: dict[str, str] = field(default_factory=dict)
    described: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def command_lines(pid: int) -> list[str]:
    """The command lines of a process and all its descendants."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    lines = []
    for proc in procs:
        try:
            lines.append(" ".join(proc.cmdline()))
        except psutil.Error:  # gone meanwhile
            continue
    return lines


def mismatch(way: Way, lines: list[str]) -> str | None:
    """Why the processes are not ``way``'s (None when they are)."""
    for needed in way.needs:
        if not any(needed in line for line in lines):
            return f"no {needed} process"
    for refused in way.refuses:
        if any(refused in line for line in lines):
            return f"a {refused} process runs"
    return None


def serve(bench: Bench, workers: int, ways: tuple[Way, ...] = WAYS) -> Served:
    """Start every way this tree serves; door + nginx from git history when this tree no
    longer does. With ``--workbench-url``, that workbench alone, as it is deployed."""
    served = Served()
    if bench.workbench_url:
        served.urls["deployed"] = bench.workbench_url
        served.described["deployed"] = f"the workbench at {bench.workbench_url} (--workbench-url)"
        return served
    for way in ways:
        note = _start(bench, way, workers, served)
        if note is None:
            continue
        if way.name == "door + nginx":
            old = _old_tree(bench)
            if isinstance(old, tuple):
                commit, tree = old
                old_note = _start(bench, way, workers, served, tree=tree,
                                  described=f"{way.described}, served from commit {commit}, "
                                            "the last whose tree has it")
                if old_note is None:
                    served.notes.append(f"{way.name}: {note} in this tree; served from "
                                        f"commit {commit}")
                    continue
                note += f"; from commit {commit}: {old_note}"
            else:
                note += f"; {old}"
        served.notes.append(f"{way.name}: not measured ({note})")
    note = bare_haproxy(bench, served)
    if note:
        served.notes.append(f"{BARE}: not measured ({note})")
    return served


def bare_haproxy(bench: Bench, served: Served) -> str | None:
    """Start the bare HAProxy reference in front of the cluster; a note when it cannot run (no
    haproxy binary, or a cluster over TLS or with credentials, which a bare proxy does not
    carry)."""
    binary = find_haproxy()
    if binary is None:
        return "no haproxy binary"
    cluster = urlsplit(bench.opensearch_url)
    if cluster.scheme != "http" or cluster.username or not cluster.hostname:
        return "the cluster is not plain http without credentials"
    port, count = free_port(), threads()
    folder = tempfile.TemporaryDirectory(prefix="bench-bare-haproxy-")
    bench.on_close(folder.cleanup)
    config = Path(folder.name) / "haproxy.cfg"
    config.write_text(BARE_CONFIG.format(maxconn=MAXCONN, threads=count, port=port,
                                         node=f"{cluster.hostname}:{cluster.port or 80}"))
    proc = Proc([binary, "-db", "-f", str(config)], dict(os.environ), "bench-bare-haproxy")
    bench.on_close(proc.stop)
    deadline = time.monotonic() + 10
    while not listening(port):
        if not proc.alive() or time.monotonic() > deadline:
            proc.stop()
            return "did not start: " + _last_line(proc.log())
        time.sleep(0.05)
    served.urls[BARE] = f"http://127.0.0.1:{port}"
    served.described[BARE] = BARE_DESCRIBED.format(threads=count)
    return None


def _start(bench: Bench, way: Way, workers: int, served: Served, tree: Path | None = None,
           described: str | None = None) -> str | None:
    """Serve ``way`` (from ``tree`` when given); a note when it does not come up as itself."""
    env = dict(way.env)
    front = env.pop("WORKBENCH_FRONT")
    try:
        server = bench.server(workers=workers, front=front,
                              prefix=["env", "-C", str(tree)] if tree else None, **env)
    except RuntimeError as exc:
        return "did not start: " + _last_line(str(exc))
    wrong = mismatch(way, command_lines(server.pid))
    if wrong:
        server.stop()
        return f"WORKBENCH_FRONT={front} starts another front ({wrong})"
    served.urls[way.name] = server.url
    served.described[way.name] = described or way.described
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "?"


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False)


def _old_tree(bench: Bench) -> tuple[str, Path] | str:
    """The last commit whose tree holds OLD_FRONT, extracted to a temporary folder that is
    removed when the benchmark's processes stop; or why there is none."""
    if _git("cat-file", "-e", f"HEAD:{OLD_FRONT}").returncode == 0:
        commit = "HEAD"  # removed in the working tree only
    else:
        last = _git("rev-list", "-1", "HEAD", "--", OLD_FRONT)
        commit = last.stdout.decode().strip()
        if last.returncode != 0 or not commit:
            return f"no commit with {OLD_FRONT} in git history"
        commit += "^"  # the commit that removed it: its parent is the last that has it
    short = _git("rev-parse", "--short", commit).stdout.decode().strip() or commit
    archive = _git("archive", commit, "workbench", "index_mappings")
    if archive.returncode != 0:
        return f"git archive {short} failed: {_last_line(archive.stderr.decode())}"
    tmp = tempfile.TemporaryDirectory(prefix="bench-old-front-")
    bench.on_close(tmp.cleanup)  # registered first, so it runs after the server stops
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tmp.name, filter="data")
    return short, Path(tmp.name)
