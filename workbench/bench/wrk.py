"""wrk (Debian's ``wrk`` package) as the benchmarks drive it: one bounded closed-loop run, its
POST bodies from a Lua script, its own report parsed for throughput, latency and errors.

A load generator written in Python saturates before a proxy written in C does (issue 22: it
showed door + nginx at 0.80 of direct where wrk showed 0.55-0.63), so a throughput ratio is only
a measurement of the proxy when the generator is not the first to run out of CPU. wrk is C and
epoll and stays a small share of the machine; its CPU is recorded with every run.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# wrk prints times with the units of its units.c: us, ms, s, then m and h for long ones.
_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_TIME = r"([0-9.]+)(us|ms|s|m|h)"


class WrkError(RuntimeError):
    """wrk is missing and could not be installed, or a run failed."""


@dataclass
class Load:
    """One bounded load run: what wrk saw."""

    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int  # socket errors and non-2xx/3xx answers
    generator_cpu: float = 0.0  # CPU seconds wrk itself used

    @property
    def generator_share(self) -> float:
        """wrk's CPU as a share of the machine's (all cores) during the run."""
        return self.generator_cpu / (self.seconds * (os.cpu_count() or 1)) if self.seconds else 0.0


def ensure() -> str:
    """The wrk binary; installed from Debian's packages when absent. A benchmark without it
    fails with this message rather than measuring with a weaker generator."""
    found = shutil.which("wrk")
    if found:
        return found
    root = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if root is not None and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run([*root, "apt-get", "install", "-y", "-qq", "wrk"], env=env, check=False)
        found = shutil.which("wrk")
    if not found:
        raise WrkError("wrk is not installed and `apt-get install -y wrk` did not install it; "
                       "the pass-through benchmark needs it (on Debian/Ubuntu: "
                       "apt-get install wrk)")
    return found


def version(wrk: str) -> str:
    """``wrk debian/4.1.0-3+b2`` from the first line of its usage text."""
    proc = subprocess.run([wrk, "--version"], capture_output=True, text=True, check=False)
    first = (proc.stdout or proc.stderr).splitlines()[:1]
    found = re.match(r"(wrk \S+)", first[0]) if first else None
    return found.group(1) if found else "wrk"


LUA = """
local bodies = %(bodies)s
local path = %(path)s
local ctype = %(ctype)s
local requests = {}
local counter = 0
local next_at = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  for n, body in ipairs(bodies) do
    requests[n] = wrk.format("POST", path, {["Content-Type"] = ctype}, body)
  end
  -- threads start at different bodies, so concurrent bulk requests write different ids
  next_at = ((id or 0) * math.floor(#requests / 2)) %% #requests
end

function request()
  next_at = next_at %% #requests + 1
  return requests[next_at]
end
"""


def lua_string(text: str) -> str:
    """A Lua long string that the text cannot close early."""
    level = 4
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def lua_script(path: str, content_type: str, bodies: list[str]) -> str:
    """The script that POSTs ``bodies`` to ``path`` in turn (wrk.format builds each request)."""
    return LUA % {"bodies": "{" + ",\n".join(lua_string(b) for b in bodies) + "}",
                  "path": lua_string(path), "ctype": lua_string(content_type)}


def command(wrk: str, base: str, script: str, seconds: float, connections: int,
            threads: int) -> list[str]:
    """The wrk command line of one run (``--latency`` prints the percentiles parsed here)."""
    return [wrk, f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds:g}s",
            "--latency", "--timeout", "30s", "-s", script, base]


def _ms(value: str, unit: str) -> float:
    return float(value) * _MS[unit]


def parse(text: str) -> Load:
    """wrk's report (with ``--latency``): requests and run time, ``Requests/sec``, the 50% and
    99% lines of the latency distribution, socket errors and non-2xx/3xx answers."""
    done = re.search(rf"^\s*(\d+) requests in {_TIME},", text, re.MULTILINE)
    rate = re.search(r"^Requests/sec:\s+([0-9.]+)\s*$", text, re.MULTILINE)
    table = text.partition("Latency Distribution")[2]
    pct = {int(p): _ms(v, u) for p, v, u in
           re.findall(rf"^\s+(\d+)%\s+{_TIME}\s*$", table, re.MULTILINE)}
    if not done or not rate or 50 not in pct or 99 not in pct:
        raise WrkError(f"unexpected wrk output:\n{text}")
    requests = int(done.group(1))
    rps = float(rate.group(1))
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       text)
    status = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = (sum(int(n) for n in socket.groups()) if socket else 0) + \
        (int(status.group(1)) if status else 0)
    # Requests/sec is requests over the exact run time; the printed run time is rounded.
    seconds = requests / rps if rps else _ms(done.group(2), done.group(3)) / 1000
    return Load(requests=requests, seconds=seconds, rps=rps, p50_ms=pct[50], p99_ms=pct[99],
                errors=errors)


def run(wrk: str, base: str, path: str, content_type: str, bodies: list[str], seconds: float,
        connections: int, threads: int) -> Load:
    """One closed-loop run of ``seconds`` against ``base``: each connection sends its next
    request when the previous answer is in."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        script = Path(tmp) / "bodies.lua"
        script.write_text(lua_script(path, content_type, bodies))
        proc = subprocess.run(command(wrk, base, str(script), seconds, connections, threads),
                              capture_output=True, text=True, timeout=seconds + 120,
                              check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise WrkError(f"wrk failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    load = parse(proc.stdout)
    if load.requests == 0:
        raise WrkError(f"wrk completed no request against {base}:\n{proc.stdout}")
    load.generator_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return load
