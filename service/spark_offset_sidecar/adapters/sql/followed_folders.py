"""``FollowedFolders`` in the service's database (table ``followed_folders``): every
replica reads the same rows, so a folder registered through any replica is followed by
the owner of its group. Each method is one short transaction and blocks."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from spark_offset_sidecar.adapters.sql.schema import followed_folders
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.ports.checkpoints import FollowedFolder

columns = followed_folders.c


class SqlFollowedFolders:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def list(self) -> Sequence[FollowedFolder]:
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(select(followed_folders).order_by(columns.path)).all()
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"reading followed folders: {exc}") from None
        return [
            FollowedFolder(
                row.path,
                row.group_id,
                None if row.topics is None else tuple(json.loads(row.topics)),
                row.registered_by,
                row.cluster,
            )
            for row in rows
        ]

    def add(self, folder: FollowedFolder) -> FollowedFolder | None:
        row = {
            "path": folder.path,
            "group_id": folder.group_id,
            "topics": None if folder.topics is None else json.dumps(list(folder.topics)),
            "registered_by": folder.registered_by,
            "registered_at": time.time(),
            "cluster": folder.cluster,
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(followed_folders.insert().values(**row))
        except IntegrityError:
            return next((f for f in self.list() if f.path == folder.path), None)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"registering {folder.path}: {exc}") from None
        return None

    def remove(self, path: str) -> bool:
        try:
            with self.engine.begin() as conn:
                removed = conn.execute(delete(followed_folders).where(columns.path == path))
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"removing {path}: {exc}") from None
        return bool(removed.rowcount)
