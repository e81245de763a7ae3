"""The way from a container without a network to the run's gateway, and nowhere else.

With ``allow_internet = false`` a container runs with ``--network none``: its own loopback
and nothing more. The run's gateway also listens on a Unix socket (in a folder of its
own); that folder is mounted into the container, and the relay the strict sandbox uses
(``agents/netbridge.py``: standard library only, run by file path with the image's
``python3``) listens on a TCP port of the container's loopback and carries every
connection to the socket. The agent is started behind it and is handed
``http://127.0.0.1:PORT/…`` as its base URL, exactly as in the strict sandbox.

This layer cannot import ``agents/``, so the caller hands in the relay's path
(``Path(agents.netbridge.__file__)``) and the socket's::

    bridge = gateway_bridge(gateway.unix_socket(), Path(netbridge.__file__))
    spec = ContainerSpec(..., network="none", mounts=(*mounts, *bridge.mounts))
    box.exec(bridge.argv(agent_command), timeout_s=...)

The relay needs a ``python3`` in the image; without one it cannot start (the exec exits
127 and says so): such a task needs ``network = "host"`` or an image with Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.environments.spec import Mount

#: Where the gateway's socket folder appears in the container.
GATEWAY_TARGET = "/run/agentbench/gateway"
#: Where the relay script appears in the container.
BRIDGE_TARGET = "/run/agentbench/netbridge.py"
#: The port the relay listens on, on the container's own loopback.
BRIDGE_PORT = 41000


@dataclass(frozen=True)
class GatewayBridge:
    """What a container needs to reach the gateway through its socket: the two read-only
    mounts (the socket's folder, the relay script), and the command prefix that starts
    the relay in front of a command."""

    mounts: tuple[Mount, ...]
    socket_target: str
    netbridge_target: str
    port: int
    python: str

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` started behind the relay: it exits with ``command``'s status."""
        return [
            self.python,
            self.netbridge_target,
            self.socket_target,
            str(self.port),
            "--",
            *command,
        ]

    def base_url(self, path: str = "") -> str:
        """The URL the command inside reaches the gateway at (``path`` appended)."""
        return f"http://127.0.0.1:{self.port}{path}"


def gateway_bridge(
    socket: str | Path, netbridge: Path, *, port: int = BRIDGE_PORT, python: str = "python3"
) -> GatewayBridge:
    """The bridge to the Unix socket ``socket`` through the relay script ``netbridge``:
    the socket's folder and the script are mounted read-only (a socket is connected to,
    never written, so a read-only mount serves it)."""
    socket = Path(socket)
    netbridge = Path(netbridge)
    mounts = (
        Mount(socket.parent, GATEWAY_TARGET, read_only=True),
        Mount(netbridge, BRIDGE_TARGET, read_only=True),
    )
    return GatewayBridge(
        mounts=mounts,
        socket_target=str(PurePosixPath(GATEWAY_TARGET) / socket.name),
        netbridge_target=BRIDGE_TARGET,
        port=port,
        python=python,
    )
