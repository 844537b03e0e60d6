"""The Python listener's page, followed to the letter: its Python blocks run as a driver
would run them (``spark`` a stand-in that keeps what is added), and the listener it shows
for a service with tokens carries one."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from harness.machine import ROOT
from spark_offset_listener.listener import OffsetCommitListener

PAGE = ROOT / "docs" / "attach" / "python-listener.md"


class Streams:
    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def addListener(self, listener: Any) -> None:
        self.listeners.append(listener)


class Spark:
    def __init__(self) -> None:
        self.streams = Streams()


def test_the_pages_listeners_are_made_as_shown_and_one_carries_a_token() -> None:
    text = PAGE.read_text()
    # At the margin, or indented in a numbered step (its fence's indent on every line).
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, re.M | re.S)
    spark = Spark()
    scope: dict[str, Any] = {"spark": spark}
    for _, block in blocks:
        exec(compile(textwrap.dedent(block), str(PAGE), "exec"), scope)
    made = spark.streams.listeners
    assert made
    assert all(isinstance(listener, OffsetCommitListener) for listener in made)
    assert any(listener._sender_options["token_file"] for listener in made), (
        "the page shows a listener with the token a service with tokens asks for"
    )
    assert "token=" in text
    assert "token_file=" in text
