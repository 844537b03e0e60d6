"""The HTTP layer in-process (FastAPI's TestClient): answers, refusals, status, ranges."""
