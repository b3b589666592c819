"""Real containers of the workbench's image, run with podman on the host's network.

Everything goes through ``scripts/image.sh``: ``build`` makes the image (cached under
``$WORKBENCH_HOME``, rebuilt only when what it is built from changed), ``podman ARGS`` runs podman
with the settings this machine needs (the one containers.conf the script writes). Containers
share the host's network, so they reach the test session's OpenSearch, Redis and stand-in LLM
on loopback as the session's own processes do.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from contextlib import suppress
from pathlib import Path

import urllib3

from tests.support.processes import wait_for_ping
from workbench.config import settings_table

REPO = Path(__file__).resolve().parents[2]
IMAGE_SH = REPO / "scripts" / "image.sh"
#: podman's healthcheck timers need systemd, which these machines do not run: its complaints
#: about that are left out of what a command printed
_SYSTEMD_NOISE = "unable to get systemd connection"


def podman(*args: str, timeout: float = 120,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    """``podman ARGS`` with scripts/image.sh's settings; stderr without the systemd noise."""
    result = subprocess.run([str(IMAGE_SH), "podman", *args], capture_output=True, text=True,
                            timeout=timeout)
    result.stderr = "\n".join(line for line in result.stderr.splitlines()
                              if _SYSTEMD_NOISE not in line)
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result


def build_image() -> str:
    """The image of this tree (``scripts/image.sh build``), built when missing; its name."""
    started = time.monotonic()
    result = subprocess.run([str(IMAGE_SH), "build"], capture_output=True, text=True,
                            timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"scripts/image.sh build failed:\n{result.stderr[-4000:]}")
    print(f"image ready in {time.monotonic() - started:.0f} s:\n{result.stderr.strip()}")
    return result.stdout.strip().splitlines()[-1]


def image_env(image: str) -> dict[str, str]:
    """The environment the image sets (its ``ENV`` lines)."""
    inspected = json.loads(podman("image", "inspect", image).stdout)
    return dict(item.split("=", 1) for item in inspected[0]["Config"]["Env"])


def settings_of(env: dict[str, str], *extra: str) -> dict[str, str]:
    """The workbench's settings in ``env`` (the variables config.py reads), and ``extra`` names:
    what a container is given, rather than the test process's whole environment."""
    names = {f.metadata["env"] for f in settings_table()} | set(extra)
    return {key: value for key, value in env.items() if key in names}


class Container:
    """``podman run -d`` of the image with ``command``, on the host's network, named and with a
    host name of its own (a job's lease names its holder's host: each container must have
    its own, as in compose or Kubernetes). ``url``: where the API listens, given
    ``WORKBENCH_PORT``. ``remove`` removes it."""

    def __init__(self, image: str, command: list[str], env: dict[str, str],
                 name: str | None = None) -> None:
        self.name = name or f"wb-test-{command[0]}-{uuid.uuid4().hex[:8]}"
        self.url = f"http://127.0.0.1:{env['WORKBENCH_PORT']}" if "WORKBENCH_PORT" in env else ""
        args = ["run", "-d", "--name", self.name, "--hostname", self.name, "--network=host"]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        podman(*args, image, *command)

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def running(self) -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return state.stdout.strip() == "true"

    def stop(self, timeout: int) -> float:
        """``podman stop -t timeout`` (SIGTERM, then SIGKILL after ``timeout`` s); the seconds
        it took."""
        started = time.monotonic()
        podman("stop", "-t", str(timeout), self.name, timeout=timeout + 60)
        return time.monotonic() - started

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False)

    def processes(self) -> list[tuple[str, str, str]]:
        """(user, host user, command line) of every process in the container (``podman top``)."""
        out = podman("top", self.name, "user", "huser", "args").stdout.splitlines()[1:]
        rows = []
        for line in out:
            user, huser, args = line.split(None, 2)
            rows.append((user, huser, args))
        return rows

    def health(self) -> tuple[int, str]:
        """``podman healthcheck run`` (podman runs the image's HEALTHCHECK on a systemd timer,
        and these machines run no systemd): its exit status, and the health podman records."""
        result = podman("healthcheck", "run", self.name, check=False, timeout=60)
        state = podman("inspect", "--format", "{{.State.Health.Status}}", self.name,
                       check=False).stdout.strip()
        return result.returncode, state

    def remove(self) -> None:
        with suppress(Exception):
            podman("rm", "-f", "-t", "5", self.name, timeout=90, check=False)

    def wait_http(self, url: str, timeout: float = 120) -> None:
        """Until ``url`` answers 200 (the API in the container is up and reaches the cluster)."""
        http = urllib3.PoolManager(retries=False, timeout=3)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.running():
                    raise RuntimeError(f"{self.name} exited:\n{self.logs()[-4000:]}")
                with suppress(urllib3.exceptions.HTTPError):
                    if http.request("GET", url).status == 200:
                        return
                time.sleep(0.5)
        finally:
            http.clear()
        raise RuntimeError(f"{self.name} did not answer in {timeout}s:\n{self.logs()[-4000:]}")

    def wait_worker(self, env: dict[str, str], timeout: float = 120) -> None:
        """Until the job consumer in the container answers a Celery ping on its queue."""
        wait_for_ping(env, self.name, f"{self.name}'s worker", self.running, self.logs, timeout)
