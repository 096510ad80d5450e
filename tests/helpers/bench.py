"""What the benchmarks' tests share: the keys of a ``geomlab bench NAME --json`` file its own ``definitions``
leave out (:func:`undefined`)."""

from __future__ import annotations

import re


def undefined(data: dict) -> set[str]:
    """The keys of a benchmark's JSON that its ``definitions`` leave out: those of the top level and of every
    record in a list, however deep (a dict value's own keys are its key's definition's to explain; a number at
    a key's end is ``<t>``, as ``test_rmse_inference_T<t>``)."""
    defs, missing = data["definitions"], set()

    def walk(value) -> None:
        if isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                if k not in defs and re.sub(r"\d+$", "<t>", k) not in defs:
                    missing.add(k)
                if isinstance(v, list):
                    walk(v)

    walk(data)
    return missing
