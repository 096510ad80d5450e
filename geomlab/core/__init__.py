"""Foundations with no geomlab concepts: where files are, run-owned randomness, the byte cache, caption markup,
bounded reading of JSON and zip input, the command-line parser and its option types, where command-line outputs go."""
