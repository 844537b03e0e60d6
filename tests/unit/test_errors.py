"""The error tree drawn at the top of ``errors`` is the real one: every error class
is drawn, under its real parent, and nothing drawn is missing from the module."""

from __future__ import annotations

import inspect
import re

from spark_offset_sidecar import errors

_NODE = re.compile(r"^(?P<indent>[│ ]*)[├└]── (?P<name>[A-Za-z]+)")


def drawn_parents() -> dict[str, str]:
    """Class name -> parent name, read from the drawing's indentation."""
    lines = (errors.__doc__ or "").splitlines()
    root = next(line.strip() for line in lines if line.strip() == "SidecarError")
    stack = [root]
    parents: dict[str, str] = {}
    for line in lines:
        found = _NODE.match(line)
        if not found:
            continue
        depth = len(found["indent"]) // 4 + 1
        del stack[depth:]
        parents[found["name"]] = stack[depth - 1]
        stack.append(found["name"])
    return parents


def test_every_error_class_is_drawn_under_its_real_parent() -> None:
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.SidecarError) and cls is not errors.SidecarError
    }
    drawn = drawn_parents()
    assert set(drawn) == set(classes), "the drawing and the module differ"
    for name, cls in classes.items():
        assert cls.__bases__[0].__name__ == drawn[name], name
