"""Checkpoints on disk: their files written as one unit, loading and saving (never pickles), the catalog."""
