"""The example in docs/whatif.md runs as written (at most 12 lines) and prints what it says."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "whatif.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, "docs/whatif.md has one python example"
    return blocks[0]


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
