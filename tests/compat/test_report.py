"""xb.compat.report: lines before and after, counted by hand here, and the backends a lifted operator runs on,
each checked against the original kernel."""
import xbench as xb
from xbench.compat.source import code_lines

from . import kernels as K


def test_code_lines_skips_blanks_comments_and_docstrings():
    text = '''
@cuda.jit
def f(a):
    """A docstring
    over two lines."""
    # a comment
    i = cuda.grid(1)   # a trailing comment counts with its line

    a[i] = 1
'''
    assert code_lines(text) == 4


def test_saxpy_report_on_every_backend():
    op = xb.compat.from_cuda(K.saxpy, out="out", launch=K.launch_saxpy)
    r = xb.compat.report(op)
    # kernel: @cuda.jit, def, i = ..., if ..., out[i] = ...; launch: def, threads, blocks, the launch
    assert (r.kernel_lines, r.launch_lines, r.device_lines) == (5, 4, 0)
    assert r.legacy_lines == 9
    # @xb.tensor_op, def, return a * x + y
    assert r.xbench_lines == 3 and r.source.splitlines()[-1].strip() == "return a * x + y"
    assert [b.backend for b in r.backends] == ["cpu", "cuda", "ascend"]
    assert r.runs_on == ["cpu", "cuda", "ascend"], r.text()
    assert "9 lines (kernel 5, launch 4)" in r.text() and "3.0x fewer" in r.text()


def test_report_counts_device_functions_and_tabulates():
    a = xb.compat.from_cuda(K.cpu_gpu_compat, out="res")
    b = xb.compat.from_cuda(K.fast_matmul, out="C", launch=K.launch_fast_matmul)
    table = xb.compat.report([a, b], backends=("cpu",))
    ra, rb = table
    # the kernel (@cuda.jit, def, tid, if, res[tid] = ...) and the numba.jit function it calls (decorator, def, return)
    assert (ra.kernel_lines, ra.device_lines, ra.launch_lines) == (5, 3, None)
    assert ra.device_functions == ["business_logic"] and "launch code not given" in ra.text()
    # 22 lines of kernel (decorator, def, 20 statements), 8 of launch code, against @xb.tensor_op / def / return
    assert (rb.kernel_lines, rb.launch_lines, rb.xbench_lines) == (22, 8, 3)
    assert all(r.runs_on == ["cpu"] for r in table)
    text = table.text()
    assert "fast_matmul" in text and "total" in text.splitlines()[-1]
    assert "<table>" in table._repr_html_()
