"""The data layer's error type (kept in its own module so every ``geomlab.data`` module can import it)."""

from __future__ import annotations


class DataError(ValueError):
    """Bad or missing data: an unknown corpus, a missing file offline, a checksum mismatch, text too short,
    an unknown token in a closed vocabulary. The message is one readable line for the CLI and the app."""
