"""The lifting tests run legacy kernels themselves: on a GPU where there is one, else in numba's CUDA simulator,
which must be chosen before numba.cuda is first imported (by kernels.py)."""
import xbench as xb

xb.compat.cuda_mode()
