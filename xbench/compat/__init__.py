"""The way out of legacy CUDA code: `from_cuda` lifts a numba.cuda kernel into an xbench operator (verified
against the kernel before it is returned), `report` counts what the migration saved and where the operator now
runs. See docs/migration.md.

    op = xb.compat.from_cuda(saxpy, out="out")
    print(op.source)
    xb.compat.report(op, launch=launch_saxpy)
"""
from .errors import LiftError, LiftMismatch
from .lift import LiftedOperator, from_cuda
from .original import cuda_mode
from .report import BackendRun, Migration, MigrationReport, report

__all__ = ["BackendRun", "LiftError", "LiftMismatch", "LiftedOperator", "Migration", "MigrationReport", "cuda_mode",
           "from_cuda", "report"]
