"""Helpers shared by the tests (imported as ``helpers.X``; ``tests/`` is on the path through conftest.py)."""
