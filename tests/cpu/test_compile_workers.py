"""A fresh module's parallel loops compile side by side: its tasks (each running a few kernels' parts) are dealt
out with its other functions to compile workers, which compile them into numba's cache; importing a module
compiles none of its tasks. No function is compiled with wrappers its callers do not use."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from xbench.backends.cpu import _shares, _task_names

CHAIN = textwrap.dedent("""
    import json, numpy as np, xbench as xb
    from xbench.backends.cpu import codegen, tasks
    from xbench.cache import import_source
    codegen.TASK_PARTS = 2                                  # a small module with more than one task

    @xb.tensor_op
    def chain(x: xb.Tensor["M", "K"], w: xb.Tensor["K", "K"], s: xb.Tensor["K"], b: xb.Tensor["K"],
              c: xb.Tensor[()]):
        y = x
        for _ in range(5):
            y = xb.maximum((y * s) @ w + b, 0.0) * c
        return y

    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    s = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    c = np.array(0.5, np.float32)
    art = chain.compile("cpu", x, w, s, b, c, schedule={f"k{i}_contract": {"parallel": True} for i in range(5)})
    names = sorted(n for n, v in vars(art.module).items() if isinstance(v, tasks.Task))
    again = import_source("chain_again", art.module.__file__)
    serial = chain.compile("cpu", x, w, s, b, c, schedule={f"k{i}_contract": {"parallel": False} for i in range(5)})
    print(json.dumps({
        "tasks": names,
        "parts": [getattr(art.module, n).parts for n in names],
        "hits": [getattr(art.module, n).cache_hits for n in names],
        "compiled_on_import": [getattr(again, n)._cfunc is not None for n in names],
        "kernel_options": {k: v for k, v in serial.module.k0_contract.targetoptions.items() if k.startswith("no_")},
        "part_options": {k: v for k, v in art.module.k0_contract_part0.targetoptions.items() if k.startswith("no_")},
        "helper_options": {k: v for k, v in art.module._xb_maximum.targetoptions.items() if k.startswith("no_")},
        "out": art.run(x, w, s, b, c)[0].tolist(),
    }))
""")


def test_a_fresh_modules_tasks_compile_in_workers_and_load_here(tmp_path):
    env = {**os.environ, "XBENCH_CACHE_DIR": str(tmp_path), "XBENCH_COMPILE_WORKERS": "1"}
    out = subprocess.run([sys.executable, "-c", CHAIN], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["tasks"] == ["_xb_task0", "_xb_task1"] and got["parts"] == [2, 2]
    # the worker compiled one task into numba's cache and this process loaded it; this process compiled the other
    assert sorted(got["hits"]) == [0, 1]
    assert got["compiled_on_import"] == [False, False]
    # Python calls a kernel (no C wrapper: 0.1-0.2 s of a cold compile each); only kernels and tasks call helpers
    # and parts
    assert got["kernel_options"] == {"no_cfunc_wrapper": True}
    assert got["helper_options"] == got["part_options"] == {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 64))
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32).astype(np.float64)
    s, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    y = x.astype(np.float32).astype(np.float64)
    for _ in range(5):
        y = np.maximum((y * s) @ w + b, 0.0) * 0.5
    np.testing.assert_allclose(np.array(got["out"]), y, rtol=1e-4, atol=1e-4)


def test_jobs_are_dealt_heaviest_first_to_the_least_loaded_share():
    jobs = [("_xb_task0", None), ("_xb_task1", None), ("k1", []), ("k2", []), ("k3", [])]
    shares = _shares(jobs, [9, 3, 1, 1, 1], 2)
    assert shares == [[("_xb_task0", None)], [("_xb_task1", None), ("k1", []), ("k2", []), ("k3", [])]]
    assert _task_names("def _xb_task0(_a):\n    pass\ndef k0(a):\n    pass\ndef _xb_task1(_a):\n") == \
        ["_xb_task0", "_xb_task1"]
