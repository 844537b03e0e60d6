"""The baselines of the throughput benchmarks: a bare FastAPI endpoint on uvicorn with no
ledger, no database, no auth and no commit loop.

    .venv/bin/python bench/bare_endpoint.py PORT [--json-only]

By default it parses the progress event with the same
model and parser as the service and answers the same shape; with ``--json-only``
(``bench/http_throughput.py``, issue 18's baseline) it only ``json.loads`` the body and
answers a small JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_offset_sidecar.core.spark.progress import parse_progress
from spark_offset_sidecar.http.models import EventAnswer, ProgressEvent

app = FastAPI()
json_only = FastAPI()


@json_only.post("/v1/progress")
async def post_json(request: Request) -> JSONResponse:
    event = json.loads(await request.body())
    return JSONResponse({"outcome": "accepted", "group_id": event["group_id"]})


@json_only.get("/readyz")
async def json_only_ready() -> dict[str, str]:
    return {"status": "ready"}


@app.post("/v1/progress")
async def post_progress(event: ProgressEvent) -> JSONResponse:
    report = parse_progress(event.progress)
    body = EventAnswer(
        outcome="accepted",
        detail=f"batch {report.batch_id} parsed",
        query_id=report.query_id,
        group_id=event.group_id,
        checkpoint_id=report.batch_id,
    )
    return JSONResponse(body.model_dump())


@app.get("/readyz")
async def ready() -> dict[str, str]:
    return {"status": "ready"}


if __name__ == "__main__":
    chosen = json_only if "--json-only" in sys.argv[2:] else app
    uvicorn.run(
        chosen, host="127.0.0.1", port=int(sys.argv[1]), access_log=False, log_level="warning"
    )
