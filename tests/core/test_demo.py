"""`make demo`: one size throughout, the IR tagged with the operator's own lines, resources as tables with units,
ratios that read the right way round, and the roofline section complete."""
from __future__ import annotations

import contextlib
import io
import re

from xbench import demo


def test_demo_tells_the_story_consistently():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert demo.main(quick=True, targets=("h100", "ascend-910b")) == 0
    text = out.getvalue()
    ir = text.split("the graph IR")[1].split("== 3.")[0]
    tags = set(re.findall(r"# line (\d+)", ir))
    assert tags == {"3", "4"}, ir                   # the operator's lines, not the runner's
    # traced, compiled and checked at one size; a simulated backend says where it was checked and why
    assert "traced for N=64, D=256" in text and "at N=64, D=256, verified" in text
    row = next(line for line in text.splitlines() if line.startswith("  cpu      pass"))
    assert "N=64, D=256" in row
    assert re.search(r"cuda: runs in numba's CUDA simulator here, so it is checked at N=37, D=41 \(", text)
    # resources as tables with units, never dict literals
    assert "{'" not in text.split("what each toolchain reported")[1].split("== 5.")[0]
    assert re.search(r"registers / thread \(max\) +\d+", text) and re.search(r"shared memory / block +[\d.]+ KiB", text)
    # ratios: "N.Nx faster" or "N.Nx slower", never a fraction "faster"
    for ratio in re.findall(r"xbench (\d+\.\d)x (faster|slower)", text):
        assert float(ratio[0]) >= 1.0
    assert not re.search(r"0\.\dx faster", text)
    # the profile and the roofline are whole: no "more lines" cut
    tail = text.split("== 6.")[1]
    assert "more lines" not in tail
    assert re.search(r"h100: float32 vector peak 66.9 TFLOP/s, hbm 3.35 TB/s, ridge 20 FLOP/B\n +predicted", tail)
    assert "ascend-910b: float32 tensor peak" in tail and "the figure: " in tail
