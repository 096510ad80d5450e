"""Peak memory of a call, for the tests that bound what an input may allocate."""

from __future__ import annotations

import tracemalloc


def peak(fn) -> tuple[BaseException | None, int]:
    """``(the exception fn() raised or None, the peak bytes traced while it ran)``."""
    tracemalloc.start()
    try:
        fn()
        err = None
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        err = exc
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return err, top
