"""Network namespaces joined to this host by a veth pair, standing in for other hosts.

A process started with ``Namespace.command`` sees only its own loopback and the link to the
host: it reaches the host at ``host_ip`` and nothing else. Services that listen on the host's
loopback (OpenSearch, Redis, the stand-in LLM) are offered on ``host_ip`` by a ``Relay``, a
plain TCP forwarder, so the processes inside reach them over the virtual link as a worker on
another machine would over the network. Needs root and iproute2 (``ip``).
"""

from __future__ import annotations

import selectors
import socket
import subprocess
import threading
import uuid
from contextlib import suppress


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Namespace:
    """``ip netns`` ``name`` with ``ns_ip``/30 inside, linked to ``host_ip`` on the host."""

    def __init__(self, subnet: int) -> None:
        tag = uuid.uuid4().hex[:6]
        self.name = f"wb-{tag}"
        self.host_if, self.ns_if = f"wbh{tag}", f"wbn{tag}"
        self.host_ip, self.ns_ip = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.name)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            inside = ("netns", "exec", self.name, "ip")
            _ip(*inside, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            _ip(*inside, "link", "set", self.ns_if, "up")
            _ip(*inside, "link", "set", "lo", "up")
        except subprocess.CalledProcessError:
            self.delete()
            raise

    def command(self, args: list[str], hostname: str) -> list[str]:
        """``args`` run inside the namespace, with a host name of their own (a UTS namespace),
        as a process on another machine would have."""
        script = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", self.name, "unshare", "--uts", "sh", "-c", script,
                hostname, *args]

    def run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.name, *args], capture_output=True,
                              text=True, timeout=30)

    def delete(self) -> None:
        with suppress(subprocess.CalledProcessError):
            _ip("link", "delete", self.host_if)  # takes its peer with it
        with suppress(subprocess.CalledProcessError):
            _ip("netns", "delete", self.name)


class Relay:
    """Forwards TCP connections made to ``(host, port)`` to ``(target_host, target_port)``,
    byte for byte in both directions, on a thread of this process."""

    def __init__(self, host: str, port: int, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server((host, port))
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.peers: dict[socket.socket, socket.socket] = {}
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while self.running:
            for key, _ in self.selector.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.listener:
                    self._accept()
                else:
                    self._pump(sock)

    def _accept(self) -> None:
        with suppress(BlockingIOError):
            client, _ = self.listener.accept()
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                return
            for one, other in ((client, upstream), (upstream, client)):
                one.setblocking(True)
                one.settimeout(30)
                self.peers[one] = other
                self.selector.register(one, selectors.EVENT_READ)

    def _pump(self, sock: socket.socket) -> None:
        other = self.peers.get(sock)
        try:
            data = sock.recv(65536)
            if data and other is not None:
                other.sendall(data)
                return
        except OSError:
            pass
        for one in (sock, other):
            if one is not None and one in self.peers:
                self.selector.unregister(one)
                del self.peers[one]
                one.close()

    def close(self) -> None:
        self.running = False
        self.thread.join(5)
        for sock in [self.listener, *self.peers]:
            with suppress(OSError):
                sock.close()
