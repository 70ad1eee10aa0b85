"""The docker-compose `cluster` profile, checked as data (no Docker engine here): Postgres, Redis, two API
nodes without workers and three workers, every research process wired to the same database and Redis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def services() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(data["services"])


def test_the_cluster_profile_has_postgres_redis_two_api_nodes_and_three_workers() -> None:
    cluster = {name: s for name, s in services().items() if "cluster" in s.get("profiles", [])}
    assert {"postgres", "redis", "api-1", "api-2", "worker"} <= set(cluster)
    apis = [s for s in cluster.values() if s.get("command", [])[:2] == ["research-tool", "serve"]]
    assert len(apis) == 2 and all("--no-worker" in s["command"] for s in apis)
    assert len({s["ports"][0] for s in apis}) == 2, "the API nodes are published on different ports"
    assert cluster["worker"]["command"] == ["research-tool", "worker"]
    assert cluster["worker"]["deploy"]["replicas"] == 3
    for name in ("api-1", "api-2", "worker"):
        env = cluster[name]["environment"]
        assert (
            env["RESEARCH_DATABASE_URL"].startswith("postgresql://")
            and "@postgres:5432/" in env["RESEARCH_DATABASE_URL"]
        )
        assert env["RESEARCH_REDIS_URL"].startswith("redis://redis:6379")
        assert cluster[name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_default_service_stays_embedded_sqlite() -> None:
    single = services()["research-tool"]
    assert "profiles" not in single
    assert "RESEARCH_DATABASE_URL" not in single["environment"]
