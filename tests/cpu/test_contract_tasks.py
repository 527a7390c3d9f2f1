"""A contraction whose packing, GEMM and epilogue are parallel loops in sequence runs each loop as tasks on
numba's threads, launched in order around the GEMM, without numba's parallel compiler."""

import numpy as np

import xbench as xb


@xb.tensor_op
def scaled_linear(x: xb.Tensor["M", "K"], w: xb.Tensor["K", "N"], s: xb.Tensor["K"], b: xb.Tensor["N"],
                  c: xb.Tensor[()]):
    return xb.maximum((x * s) @ w + b, 0.0) * c


def test_packing_gemm_and_epilogue_run_as_tasks_with_the_serial_result():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1500, 128)).astype(np.float32)
    w = rng.standard_normal((128, 96)).astype(np.float32)
    s = rng.standard_normal(128).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    c = np.array(0.5, np.float32)                   # a 0-d buffer, read in every part
    args = (x, w, s, b, c)
    name = "k0_contract"
    par = scaled_linear.compile("cpu", *args, schedule={name: {"parallel": True}})
    ser = scaled_linear.compile("cpu", *args, schedule={name: {"parallel": False}})
    assert [k.name for k in par.program.kernels] == [name]
    # one part per parallel loop (the packing of x * s, the epilogue), and no parallel loop left to numba
    assert f"def {name}_part0(" in par.source and f"def {name}_part1(" in par.source
    assert "numba.prange(" not in par.source and "parallel=True" not in par.source
    assert "numba.prange(" not in ser.source and "_xb_parallel_for(" not in ser.source
    launcher = par.kernels[0].source
    assert launcher.index("_xb_parallel_for(_xb_task, 0,") < launcher.index("_xb_dot(") \
        < launcher.index("_xb_parallel_for(_xb_task, 1,")
    # each launch passes the buffers its part uses (and the 0-d one every part reads), not the kernel's all
    assert "_xb_parallel_for(_xb_task, 0, 1500, x, s, c, _A)" in launcher
    assert "_xb_parallel_for(_xb_task, 1, 1500, b, c, out, _C)" in launcher
    got = par.run(*args)[0]
    want = np.maximum((x.astype(np.float64) * s) @ w + b, 0) * 0.5
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, ser.run(*args)[0], rtol=1e-6, atol=1e-6)


@xb.tensor_op
def batched_products(x: xb.Tensor["B", "M", "K"], w: xb.Tensor["B", "K", "N"], s: xb.Tensor["K"]):
    return xb.maximum((x * s) @ w, 0.0)


def test_one_batch_point_runs_as_tasks_and_a_batch_loop_keeps_numbas_parallel_loops():
    # as the hardware model prices them (tests/profile/test_predict.py)
    rng = np.random.default_rng(1)
    for batches, tasks in ((1, True), (3, False)):
        args = (rng.standard_normal((batches, 640, 32)).astype(np.float32),
                rng.standard_normal((batches, 32, 48)).astype(np.float32), rng.standard_normal(32).astype(np.float32))
        art = batched_products.compile("cpu", *args, schedule={"k0_contract": {"parallel": True}})
        assert ("numba.prange(" not in art.source) == tasks and ("k0_contract_part1(" in art.source) == tasks
        want = np.maximum(np.matmul(args[0].astype(np.float64) * args[2], args[1]), 0)
        np.testing.assert_allclose(art.run(*args)[0], want, rtol=1e-4, atol=1e-4)
