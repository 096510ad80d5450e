"""The examples in docs/whatif.md run as written: the first (at most 12 lines) prints what it says, every
other one runs without an error."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "whatif.md"


def examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/whatif.md has a python example"
    return blocks


def example() -> str:
    return examples()[0]


def test_every_other_example_runs():
    for code in examples()[1:]:
        exec(compile(code, str(DOC), "exec"), {})


def test_the_example_is_short_and_runs(capsys):
    code = example()
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    out = capsys.readouterr().out
    assert "layer 0, position 20: H -> H exp(1 X), X generator 0 (rotation (1,2))" in out
    assert "KL (bits) from position 20 on:" in out
    kl = namespace["out"].kl_bits()
    assert kl[:20].max() < 1e-6 and kl[20:].max() > 0
