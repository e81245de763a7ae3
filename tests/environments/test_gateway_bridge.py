"""A container without a network reaches the gateway's Unix socket through the relay,
and nothing else: the mechanism ``allow_internet = false`` rests on."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE

import pytest_agentbench.agents.netbridge as netbridge
from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.environments.gateway import gateway_bridge
from pytest_agentbench.errors import ContainerError


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"gateway saw {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: object) -> None:
        return


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def unix_gateway(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "gw"
    folder.mkdir()
    path = folder / "gw.sock"
    server = _UnixHTTPServer(str(path), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()


FETCH = (
    "import sys, urllib.request\n"
    "for url in sys.argv[1:]:\n"
    "    try:\n"
    "        print(urllib.request.urlopen(url, timeout=5).read().decode())\n"
    "    except OSError as exc:\n"
    "        print('unreachable', type(exc).__name__)\n"
)


def test_the_gateway_and_nothing_else(engine: Engine, run_id: str, unix_gateway: Path) -> None:
    bridge = gateway_bridge(unix_gateway, Path(netbridge.__file__))
    spec = ContainerSpec(
        image=BASE_IMAGE,
        name=new_name(run_id, "main", "bridge", 0),
        run_id=run_id,
        network="none",
        mounts=bridge.mounts,
    )
    with Container.start(engine, spec) as box:
        urls = [bridge.base_url("/agent/r1/v1/models"), "http://1.1.1.1/", "http://example.com/"]
        result = box.exec(bridge.argv(["python3", "-c", FETCH, *urls]), timeout_s=60)
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "gateway saw /agent/r1/v1/models"
        assert lines[1].startswith("unreachable") and lines[2].startswith("unreachable")
        # the relay's exit is the command's
        assert box.exec(bridge.argv(["sh", "-c", "exit 5"]), timeout_s=60).exit_code == 5
        with pytest.raises(ContainerError, match="Read-only"):
            box.write_file(bridge.socket_target + ".planted", b"x")
