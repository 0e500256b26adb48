"""A fresh Redis Cluster for a test module (3 masters, 3 replicas on loopback ports
18400-18405, from ``redis-server --cluster-enabled yes`` and ``redis-cli --cluster create``)
and the helpers to reach its nodes. Skipped without cluster support (failed under CI=true).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
import redis

PORTS = list(range(18400, 18406))
URL = "redis+cluster://127.0.0.1:18400,127.0.0.1:18401,127.0.0.1:18402/"


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"Redis Cluster test cannot run under CI: {reason}")
    pytest.skip(reason)


def node(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory):
    """A fresh 3-master, 3-replica cluster for this module; torn down after it."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        unavailable("redis-server and redis-cli are not installed")
    usage = subprocess.run([cli, "--cluster", "help"], capture_output=True, text=True)
    if "create" not in usage.stdout + usage.stderr:
        unavailable("this redis-cli has no --cluster create (Redis < 5)")
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"port {port} is in use (a cluster left running?)")
    base = tmp_path_factory.mktemp("redis-cluster")
    processes: list[subprocess.Popen] = []
    try:
        for port in PORTS:
            directory = base / str(port)
            directory.mkdir()
            processes.append(subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(directory / "nodes.conf"),
                 "--cluster-node-timeout", "2000", "--dir", str(directory), "--save", "",
                 "--appendonly", "no", "--logfile", str(directory / "redis.log")],
                stdout=subprocess.DEVNULL, stderr=open(directory / "stderr", "wb")))  # noqa: SIM115
        for port, process in zip(PORTS, processes, strict=True):
            deadline = time.monotonic() + 20
            while True:
                if process.poll() is not None:
                    error = (base / str(port) / "stderr").read_text(errors="replace")
                    if "cluster" in error.lower() or "bad directive" in error.lower():
                        unavailable(f"redis-server lacks cluster support: {error.strip()}")
                    pytest.fail(f"redis-server on {port} exited: {error.strip()}")
                try:
                    if node(port).ping():
                        break
                except redis.RedisError:
                    pass
                assert time.monotonic() < deadline, f"redis-server on {port} never answered"
                time.sleep(0.05)
        if node(PORTS[0]).info("server").get("redis_mode") != "cluster":
            unavailable("redis-server ignored --cluster-enabled yes")
        create = subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in PORTS),
             "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True,
            timeout=60)
        assert create.returncode == 0, create.stdout + create.stderr
        wait_for(lambda: all(node(p).cluster("info")["cluster_state"] == "ok"
                          for p in PORTS), "cluster_state:ok on every node")
        wait_for(lambda: sum(node(p).info("replication")["role"] == "slave"
                          and node(p).info("replication")["master_link_status"] == "up"
                          for p in PORTS) == 3, "3 replicas in sync")
        yield URL
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
