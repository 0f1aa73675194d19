"""``docker-compose.yml`` and the ``Dockerfile`` fit together and only use real settings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from memstream.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
SERVICES: dict[str, Any] = COMPOSE["services"]
APP_SERVICES = ("migrate", "worker", "api")


def test_the_six_services_exist() -> None:
    assert set(SERVICES) == {"kafka", "mysql", "redis", "migrate", "worker", "api"}


@pytest.mark.parametrize("name", ["kafka", "mysql", "redis", "worker", "api"])
def test_long_running_services_have_healthchecks(name: str) -> None:
    test = SERVICES[name]["healthcheck"]["test"]
    assert isinstance(test, list)
    assert test[0] in {"CMD", "CMD-SHELL"}
    assert len(test) > 1


@pytest.mark.parametrize(
    ("name", "probe"),
    [
        ("kafka", "kafka-broker-api-versions.sh"),
        ("mysql", "mysqladmin ping"),
        ("redis", "redis-cli"),
        ("worker", "http://127.0.0.1:6066/"),
        ("api", "http://127.0.0.1:8080/healthz"),
    ],
)
def test_healthchecks_probe_the_right_thing(name: str, probe: str) -> None:
    assert probe in " ".join(SERVICES[name]["healthcheck"]["test"])


@pytest.mark.parametrize("name", ["worker", "api"])
def test_app_services_wait_for_their_dependencies(name: str) -> None:
    depends_on = SERVICES[name]["depends_on"]
    assert depends_on["migrate"]["condition"] == "service_completed_successfully"
    assert depends_on["kafka"]["condition"] == "service_healthy"
    assert depends_on["redis"]["condition"] == "service_healthy"


def test_migrate_runs_once_after_mysql() -> None:
    migrate = SERVICES["migrate"]
    assert migrate["depends_on"]["mysql"]["condition"] == "service_healthy"
    assert migrate["restart"] == "no"


@pytest.mark.parametrize(("name", "command"), [(n, n) for n in APP_SERVICES])
def test_app_services_build_the_image_and_run_their_command(name: str, command: str) -> None:
    service = SERVICES[name]
    assert service["build"] == "."
    assert service["command"] in ([command], command, f"memstream {command}")


def test_app_services_share_the_environment() -> None:
    envs = [SERVICES[name]["environment"] for name in APP_SERVICES]
    assert envs[0] == envs[1] == envs[2]
    env = envs[0]
    assert env["MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert env["MEMSTREAM_DATABASE_URL"].startswith("mysql+aiomysql://")
    assert env["MEMSTREAM_REDIS_URL"] == "redis://redis:6379/0"
    assert env["MEMSTREAM_API_HOST"] == "0.0.0.0"
    # The API binds every interface there: it ships with a key (one demo tenant), never open.
    assert env["MEMSTREAM_API_KEYS"] == "${MEMSTREAM_API_KEYS:-compose-demo-key:demo}"
    default = env["MEMSTREAM_API_KEYS"].removeprefix("${MEMSTREAM_API_KEYS:-").removesuffix("}")
    assert Settings(api_host=env["MEMSTREAM_API_HOST"], api_keys=default).tenant_of_key == {
        "compose-demo-key": "demo"
    }


def test_kafka_advertises_the_address_the_containers_use() -> None:
    env = SERVICES["kafka"]["environment"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert "broker" in env["KAFKA_PROCESS_ROLES"] and "controller" in env["KAFKA_PROCESS_ROLES"]


def test_every_memstream_variable_is_a_setting() -> None:
    known = {f"MEMSTREAM_{name.upper()}" for name in Settings.model_fields}
    used = set(re.findall(r"\bMEMSTREAM_[A-Z0-9_]+\b", COMPOSE_TEXT))
    assert used, "the compose file sets no MEMSTREAM_ variable"
    assert sorted(used - known) == []


def test_api_port_is_published_and_matches_the_setting() -> None:
    env = SERVICES["api"]["environment"]
    port = env.get("MEMSTREAM_API_PORT", Settings.model_fields["api_port"].default)
    assert any(str(p).endswith(f":{port}") for p in SERVICES["api"]["ports"])


def test_dockerfile_runs_memstream_as_a_non_root_user() -> None:
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    instructions = [line.split(None, 1) for line in lines if line and not line.startswith("#")]
    by_name: dict[str, list[str]] = {}
    for parts in instructions:
        if len(parts) == 2:
            by_name.setdefault(parts[0].upper(), []).append(parts[1].strip())
    assert by_name["FROM"][0].startswith("python:3.11")
    assert json.loads(by_name["ENTRYPOINT"][-1]) == ["memstream"]
    assert by_name["USER"][-1] not in {"root", "0"}


def test_dockerignore_keeps_the_virtualenv_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert ".venv" in ignored and ".git" in ignored


PROMETHEUS: dict[str, Any] = yaml.safe_load(
    (ROOT / "deploy" / "prometheus.yml").read_text(encoding="utf-8")
)


@pytest.mark.parametrize(
    ("job", "service", "port"),
    [
        ("memstream-api", "api", SERVICES["api"]["environment"]["MEMSTREAM_API_PORT"]),
        ("memstream-worker", "worker", Settings.model_fields["worker_web_port"].default),
    ],
)
def test_prometheus_discovers_every_replica_of_a_service(job: str, service: str, port: Any) -> None:
    """Service discovery on the compose service name, which Docker's DNS answers with every
    replica's address: a static target would be one replica of a scaled service."""
    (config,) = [c for c in PROMETHEUS["scrape_configs"] if c["job_name"] == job]
    assert "static_configs" not in config
    (sd,) = config["dns_sd_configs"]
    assert sd["names"] == [service] and sd["type"] == "A"
    assert sd["port"] == int(port)
    assert config["metrics_path"] == "/metrics"
    assert service in SERVICES


def test_the_worker_serves_metrics_on_every_interface_of_its_container() -> None:
    env = SERVICES["worker"]["environment"]
    assert env["MEMSTREAM_WORKER_WEB_HOST"] == "0.0.0.0"
    assert int(env.get("MEMSTREAM_WORKER_WEB_PORT", 6066)) == 6066


def test_api_replicas_can_scale_without_fighting_over_a_host_port() -> None:
    (published,) = SERVICES["api"]["ports"]
    host_ports = str(published).rsplit(":", 1)[0].split(":")[-1]
    first, _, last = host_ports.partition("-")
    assert last and int(last) > int(first), "a single host port allows a single replica"
