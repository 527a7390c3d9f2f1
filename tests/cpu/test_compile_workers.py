"""A fresh module's parallel loops compile side by side: each kernel's part is a C function of its own, dealt out
with the module's other functions to compile workers, which compile them into numba's cache; the module's task
calls the parts by symbol, so their code is not compiled again inside it. Importing a module compiles none of
them, and no function is compiled with wrappers its callers do not use."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from xbench.backends.cpu import _lazy_names

CHAIN = textwrap.dedent("""
    import json, re, numpy as np, xbench as xb
    from xbench.backends.cpu import tasks
    from xbench.cache import import_source

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
    m = art.module
    parts = sorted(n for n, v in vars(m).items() if isinstance(v, tasks.Part))
    again = import_source("chain_again", m.__file__)
    serial = chain.compile("cpu", x, w, s, b, c, schedule={f"k{i}_contract": {"parallel": False} for i in range(5)})
    own = next(n for n in parts if getattr(m, n).cache_hits == 0)          # a part compiled in this process
    print(json.dumps({
        "parts": parts,
        "part_hits": [getattr(m, n).cache_hits for n in parts],
        "task_hits": m._xb_task.cache_hits,
        "task_calls": sorted(p.__name__ for p in m._xb_task.parts),
        "declared": sorted(re.findall(r"declare [^@]*@xbench_\\w+_(k\\d+_contract_part\\d*)\\(",
                                      m._xb_task.compile().inspect_llvm())),
        "noalias": re.search(r"define [^\\n]*" + own + r"[^\\n]*", getattr(m, own).compile().inspect_llvm()).group(0)
                   .count("noalias"),
        "compiled_on_import": [getattr(again, n)._cfunc is not None for n in [*parts, "_xb_task"]],
        "kernel_options": {k: v for k, v in serial.module.k0_contract.targetoptions.items() if k.startswith("no_")},
        "helper_options": {k: v for k, v in m._xb_maximum.targetoptions.items() if k.startswith("no_")},
        "out": art.run(x, w, s, b, c)[0].tolist(),
    }))
""")


def test_a_fresh_modules_parts_compile_in_workers_and_the_task_calls_them_by_symbol(tmp_path):
    env = {**os.environ, "XBENCH_CACHE_DIR": str(tmp_path), "XBENCH_COMPILE_WORKERS": "1"}
    out = subprocess.run([sys.executable, "-c", CHAIN], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    parts = got["parts"]
    assert len(parts) == 4 and got["task_calls"] == parts
    # the worker compiled half the parts into numba's cache and this process loaded them; the task compiled here,
    # last, declaring each part as an external function rather than compiling the part's code into its own
    assert sorted(got["part_hits"]) == [0, 0, 1, 1] and got["task_hits"] == 0
    assert got["declared"] == parts
    assert got["noalias"] >= 3                      # the part's buffers, as a prange body's are
    assert got["compiled_on_import"] == [False] * 5
    # Python calls a kernel (no C wrapper: 0.1-0.2 s of a cold compile each); only kernels call helpers
    assert got["kernel_options"] == {"no_cfunc_wrapper": True}
    assert got["helper_options"] == {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 64))
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32).astype(np.float64)
    s, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    y = x.astype(np.float32).astype(np.float64)
    for _ in range(5):
        y = np.maximum((y * s) @ w + b, 0.0) * 0.5
    np.testing.assert_allclose(np.array(got["out"]), y, rtol=1e-4, atol=1e-4)


def test_the_functions_that_compile_on_first_use_are_found_in_the_source():
    source = ('@_XB_PART(fastmath=FASTMATH, error_model="numpy")\ndef k0_part0(_p_a, _lo, _hi):\n    pass\n'
              '@numba.njit\ndef k1(a):\n    pass\n@_XB_PART()\ndef k2_part(_p_a, _lo, _hi):\n    pass\n'
              '@_XB_TASK\ndef _xb_task(_args, _dims, _steps, _data):\n    pass\n')
    assert _lazy_names(source) == (["k0_part0", "k2_part"], ["_xb_task"])
