"""docker/compose.yaml cross-checked against the code it runs (no Docker engine runs on these
machines): every FEATUREBUDGET_* variable it sets is a real setting with a valid value,
every service has a healthcheck that probes what the service serves, the batch worker
service exists, the commands are real CLI commands, and prometheus.yml scrapes what compose
runs, where it listens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from service.cli import build_parser
from service.settings import Settings
from tests.support.processes import DOCKER

COMPOSE = DOCKER / "compose.yaml"


def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: str(v) for k, v in env.items()}


def interpolated(value: str) -> str:
    """compose's ``${NAME:-default}`` with NAME unset."""
    return re.sub(r"\$\{[A-Z0-9_]+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", value)


def built(service: dict) -> bool:
    build = service.get("build")
    return isinstance(build, dict) and build.get("dockerfile") == "docker/Dockerfile"


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_every_featurebudget_variable_is_a_real_setting():
    prefix = Settings.model_config["env_prefix"]
    seen = 0
    for name, service in services().items():
        values = {}
        for key, value in environment(service).items():
            if not key.startswith(prefix):
                continue
            field = key[len(prefix):].lower()
            assert field in Settings.model_fields, f"{name}: {key} is not a setting"
            values[field] = interpolated(value)
            seen += 1
        if values:
            Settings(**values)  # the values are valid for their settings
    assert seen >= 3


def test_every_service_has_a_healthcheck():
    for name, service in services().items():
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        test = check["test"]
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
    # the featurebudget services probe their own port
    for name in ("api", "worker"):
        service = services()[name]
        command = service["command"]
        port = option(command, "--port") if command[1] == "serve" else \
            option(command, "--metrics-port")
        probe = " ".join(service["healthcheck"]["test"])
        assert f"127.0.0.1:{port}/" in probe, name


def test_worker_service_exists_and_prometheus_scrapes_what_compose_runs():
    all_services = services()
    workers = [n for n, s in all_services.items() if built(s) and s["command"][:2] ==
               ["featurebudget", "worker"]]
    apis = [n for n, s in all_services.items() if built(s) and s["command"][:2] ==
            ["featurebudget", "serve"]]
    assert workers and apis
    api, worker = all_services[apis[0]], all_services[workers[0]]
    # several API workers share /metrics through the multiprocess directory
    assert int(option(api["command"], "--workers")) > 1
    assert environment(api)["PROMETHEUS_MULTIPROC_DIR"] in api.get("tmpfs", [])
    assert environment(api)["FEATUREBUDGET_STORAGE_URL"] == environment(worker)[
        "FEATUREBUDGET_STORAGE_URL"]
    assert option(api["command"], "--host") == "0.0.0.0"
    assert environment(worker)["FEATUREBUDGET_METRICS_HOST"] == "0.0.0.0"
    config = yaml.safe_load((DOCKER / "prometheus/prometheus.yml").read_text())
    targets = {job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
               for job in config["scrape_configs"]}
    listening = {f"{apis[0]}:{option(api['command'], '--port')}",
                 f"{workers[0]}:{option(worker['command'], '--metrics-port')}"}
    assert {t for ts in targets.values() for t in ts} == listening
    # Prometheus gets prometheus.yml and the rule files it names
    prometheus = all_services["prometheus"]
    mounts = [v.split(":") for v in prometheus["volumes"]]
    (source, target, *_), = [m for m in mounts if m[1] == "/etc/prometheus"]
    folder = (COMPOSE.parent / source).resolve()
    assert (folder / "prometheus.yml").is_file()
    for rules in config["rule_files"]:
        assert (folder / rules).is_file(), rules


def test_grafana_provisioning_matches_the_dashboard():
    grafana = services()["grafana"]
    mounts = dict(reversed(v.split(":")[:2]) for v in grafana["volumes"])
    provisioning = (COMPOSE.parent / mounts["/etc/grafana/provisioning"]).resolve()
    datasource = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((provisioning / "dashboards/featurebudget.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    dashboards = Path(mounts[path])
    dashboard = json.loads((COMPOSE.parent / dashboards / "featurebudget.json").read_text())
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == uid, panel["title"]


def test_commands_are_cli_commands():
    commands = [s["command"] for s in services().values() if built(s)]
    assert len(commands) >= 2
    for command in commands:
        assert command[0] == "featurebudget"
        build_parser().parse_args(command[1:])  # SystemExit (a test error) if not


def test_published_ports_leave_the_default_serve_port_free():
    """compose and a `featurebudget serve` with its defaults run side by side on one host."""
    default = build_parser().parse_args(["serve"]).port
    published = [int(str(mapping).split(":")[-2]) for service in services().values()
                 for mapping in service.get("ports", [])]
    assert published and len(published) == len(set(published))
    assert default not in published, f"compose publishes {default}, serve's default port"
    api = services()["api"]
    assert [str(m).split(":")[-1] for m in api["ports"]] == [option(api["command"], "--port")]
