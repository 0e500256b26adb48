"""Starting, waiting for and stopping the service processes the load tests run:
``featurebudget serve`` (the API, one or several uvicorn workers), ``featurebudget worker``
(the batch worker) and a private ``redis-server``. Only loopback.

    env = service_env(redis_url="redis://127.0.0.1:6379/12", data_dir=tmp)
    api = serve(18100, env, log_dir=tmp, workers=2)
    wait_ready(api)                      # /readyz answers 200, or RuntimeError with the log
    ...
    api.stop()                           # SIGTERM (SIGKILL after a timeout); exit status
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.support, when this is imported from a script
    sys.path.insert(0, str(ROOT))

from tests.support.ports import free_port, pick_port, port_free  # noqa: E402, F401


# ---------------------------------------------------------------------------- processes
def service_env(*, redis_url: str | None = None, data_dir: str | Path | None = None,
                clean: bool = True, **settings) -> dict:
    """The environment of a service process. ``clean``: without the caller's
    ``FEATUREBUDGET_*`` and ``PROMETHEUS_MULTIPROC_DIR`` (only what is given here counts);
    otherwise the caller's, less its ``FEATUREBUDGET_REDIS_URL``. ``settings``: more
    ``FEATUREBUDGET_<NAME>`` values (``snapshot_every_seconds=1`` ->
    ``FEATUREBUDGET_SNAPSHOT_EVERY_SECONDS=1``)."""
    if clean:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FEATUREBUDGET_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    else:
        env = dict(os.environ)
        env.pop("FEATUREBUDGET_REDIS_URL", None)
    if redis_url:
        env["FEATUREBUDGET_REDIS_URL"] = redis_url
    if data_dir is not None:
        env["FEATUREBUDGET_DATA_DIR"] = str(data_dir)
    for name, value in settings.items():
        env[f"FEATUREBUDGET_{name.upper()}"] = str(value)
    return env


class Child:
    """A process started by a load test, its output in ``log_dir/label.log`` (or the
    caller's terminal when ``log_dir`` is None); ``stop`` closes the log."""

    def __init__(self, label: str, argv: list[str], env: dict,
                 log_dir: str | Path | None = None) -> None:
        self.label = label
        self.argv, self.env = argv, env
        self.log_path = Path(log_dir) / f"{label}.log" if log_dir is not None else None
        self.url: str | None = None
        self.log = None
        self.process: subprocess.Popen
        self.start()

    def start(self) -> None:
        """(Re)start the process with the same command and environment; the log file is
        appended to."""
        output = None
        if self.log_path is not None:
            if self.log is None or self.log.closed:  # a new log; a restart appends
                self.log = open(self.log_path, "wb" if self.log is None else "ab")  # noqa: SIM115
            output = self.log
        self.process = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=output,
                                        stderr=subprocess.STDOUT if output else None)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        if self.log_path is None:
            return ""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL (a crash) and reap; the log stays open for a restart."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                print(f"{self.label}: no exit {timeout:.0f} s after SIGTERM, killing",
                      file=sys.stderr)
                self.process.kill()
                self.process.wait(timeout=30)
        if self.log is not None:
            self.log.close()
        return self.process.returncode


def serve(port: int, env: dict, log_dir: str | Path | None = None, *, workers: int = 1,
          label: str | None = None, log_level: str = "warning") -> Child:
    """``featurebudget serve`` on 127.0.0.1:``port`` (which must be free)."""
    if not port_free(port):
        raise RuntimeError(f"port {port} is in use")
    argv = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port",
            str(port), "--log-level", log_level]
    if workers != 1:
        argv += ["--workers", str(workers)]
    child = Child(label or f"api-{port}", argv, env, log_dir)
    child.url = f"http://127.0.0.1:{port}"
    return child


def worker(env: dict, log_dir: str | Path | None = None, *, metrics_port: int = 0,
           label: str = "worker", log_level: str = "warning") -> Child:
    """``featurebudget worker`` (batch models, Redis); ``metrics_port`` 0: no metrics."""
    return Child(label, [sys.executable, "-m", "service.cli", "worker", "--metrics-port",
                         str(metrics_port), "--log-level", log_level], env, log_dir)


def wait_ready(child: Child, url: str | None = None, timeout: float = 240.0,
               poll: float = 0.2) -> float:
    """Seconds until ``GET url/readyz`` answered 200; RuntimeError (with the end of the log)
    if the process exits or ``timeout`` passes first."""
    import httpx

    from clients import FeaturebudgetClient, ServiceError

    started = time.monotonic()
    deadline = started + timeout
    with FeaturebudgetClient(url or child.url, timeout=2) as client:
        while time.monotonic() < deadline:
            if not child.alive():
                raise RuntimeError(f"{child.label} exited ({child.process.returncode}):\n"
                                   f"{child.tail()}")
            try:
                client.readyz()
                return time.monotonic() - started
            except (ServiceError, httpx.HTTPError):
                pass
            time.sleep(poll)
    raise RuntimeError(f"{child.label} not ready within {timeout} s:\n{child.tail()}")


def children_of(pid: int) -> list[int]:
    """The direct child processes of ``pid`` (uvicorn's workers under ``serve --workers``)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (from /proc), None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


# ---------------------------------------------------------------------------- redis
class RedisServer:
    """A private ``redis-server`` (never the shared one) in ``directory``, by default with
    the append-only file on and fsynced on every write; ``kill`` / ``start`` for crashes."""

    def __init__(self, port: int, directory: str | Path, *, appendonly: bool = True,
                 appendfsync: str = "always") -> None:
        self.port = port
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                     "--dir", str(self.directory), "--save", "",
                     "--appendonly", "yes" if appendonly else "no",
                     "--appendfsync", appendfsync, "--logfile", "redis.log"]
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{port}"

    def start(self, timeout: float = 30.0) -> None:
        if not port_free(self.port):
            raise RuntimeError(f"port {self.port} is in use")
        self.process = subprocess.Popen(self.argv, cwd=self.directory,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ping():
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited ({self.process.returncode}); see "
                                   f"{self.directory / 'redis.log'}")
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not answer within {timeout} s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: whatever the AOF holds is what survives."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
