"""Per-partition figures kept as columns: a group's 32 partitions are a tuple of topic names
and two byte strings, which the cyclic collector does not scan, not 32 tuples it does
(docs/decisions.md, "Per-partition figures packed"). A ``PackedRows`` is a read-only
``Sequence`` of the named tuples it was packed from, each made again when it is read.

Invariants
  - ``rows == tuple(packed)`` for the rows it was packed from, and a packed sequence is
    equal to (and hashes as) the tuple of its rows.
  - A column of whole numbers keeps ``None`` as ``NO_INT`` (no offset, lag or count is
    that low); a column of real numbers keeps it as NaN (no figure is NaN).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar, overload

NO_INT = -(2**63)  # None, in a column of whole numbers

Row = TypeVar("Row", bound=tuple[object, ...])


def int_or_none(value: int | None) -> int:
    return NO_INT if value is None else value


def float_or_none(value: float | None) -> float:
    return math.nan if value is None else value


def none_if_no_int(value: int) -> int | None:
    return None if value == NO_INT else value


def none_if_nan(value: float) -> float | None:
    return None if value != value else value  # NaN is the one value unequal to itself


class PackedRows(Sequence[Row], Generic[Row]):
    """Rows of one kind as columns: the topic of each row, ``width`` whole numbers and
    ``real_width`` real numbers per row. A subclass says how a row is split into its
    columns (``split``) and made again from them (``join``)."""

    __slots__ = ("_ints", "_reals", "_topics")
    width: int
    real_width: int

    def __init__(self, rows: Iterable[Row]) -> None:
        topics: list[str] = []
        ints: array[int] = array("q")
        reals: array[float] = array("d")
        for row in rows:
            topic, whole, real = self.split(row)
            topics.append(topic)
            ints.extend(whole)
            reals.extend(real)
        self._topics = tuple(topics)
        # Kept as bytes, read through a view made at each read (``ints``, ``reals``).
        self._ints = ints.tobytes()
        self._reals = reals.tobytes()

    @property
    def ints(self) -> Sequence[int]:
        """The whole numbers, ``width`` a row."""
        return memoryview(self._ints).cast("q")

    @property
    def reals(self) -> Sequence[float]:
        """The real numbers, ``real_width`` a row."""
        return memoryview(self._reals).cast("d")

    def split(self, row: Row) -> tuple[str, Sequence[int], Sequence[float]]:
        """``row``'s topic, whole numbers and real numbers (``width`` and ``real_width``)."""
        raise NotImplementedError

    def join(
        self, topic: str, ints: Sequence[int], at: int, reals: Sequence[float], at_real: int
    ) -> Row:
        """The row whose whole numbers start at ``ints[at]``, its reals at ``reals[at_real]``."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._topics)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Row, ...]: ...
    def __getitem__(self, index: int | slice) -> Row | tuple[Row, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row index out of range")
        return self.join(
            self._topics[index], self.ints, index * self.width, self.reals, index * self.real_width
        )

    def __iter__(self) -> Iterator[Row]:
        join, ints, reals, w, r = self.join, self.ints, self.reals, self.width, self.real_width
        for i, topic in enumerate(self._topics):
            yield join(topic, ints, i * w, reals, i * r)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedRows):
            return (
                type(other) is type(self)
                and self._topics == other._topics
                and self._ints == other._ints
                and _same_reals(self.reals, other.reals)
            )
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


def _same_reals(a: Sequence[float], b: Sequence[float]) -> bool:
    """Equal columns of reals, NaN (None) equal to NaN."""
    return len(a) == len(b) and all(
        x == y or (x != x and y != y) for x, y in zip(a, b, strict=True)
    )
