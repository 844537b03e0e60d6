"""The baseline for ``bench/callback_throughput.py``: a bare uvicorn endpoint that parses
the same progress event with the same model and parser as the service and answers the
same shape, with no ledger, no database, no auth and no commit loop.

    .venv/bin/python bench/bare_endpoint.py PORT
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_offset_sidecar.core.spark_progress import parse_progress
from spark_offset_sidecar.http.models import EventAnswer, ProgressEvent

app = FastAPI()


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
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=False, log_level="warning")
