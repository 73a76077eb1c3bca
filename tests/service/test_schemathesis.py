"""Property tests over the OpenAPI document (Schemathesis): no server error, and every
answer conforms to the document (status codes, content types, bodies, headers).

Bounded to run in well under two minutes: a few examples per operation,
derandomized, round time limits capped at a fraction of a second. A cluster
``prod`` exists, so the round API is exercised beyond 404s (the document
gives ``prod`` as the example cluster name).

Left out: ``positive_data_acceptance``. The published formats are JSON
Schemas, but a file valid against the schema can still break the data model
(a node of an unknown GPU type, a job naming an unknown tenant), and such a
request is rightly a 422 naming the field.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from whale_opt.generate import generate  # noqa: E402
from whale_opt.io import instance_to_dict  # noqa: E402
from whale_opt.service import ServiceConfig, create_app  # noqa: E402

_DB = Path(tempfile.mkdtemp(prefix="whale-opt-schemathesis-")) / "state.db"
app = create_app(
    ServiceConfig(db=str(_DB), pool="thread", max_time_limit_s=0.3, request_timeout_s=30)
)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module", autouse=True)
def _prod_cluster() -> Iterator[None]:
    """The app started for the whole module, with cluster ``prod``."""
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        instance = instance_to_dict(generate("hetero", gpus=32, queued=6))
        created = client.post("/v1/clusters", json={"name": "prod", "instance": instance})
        assert created.status_code == 201, created.text
        yield
    shutil.rmtree(_DB.parent, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_openapi_document(case: schemathesis.Case) -> None:
    case.call_and_validate(
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
    )
