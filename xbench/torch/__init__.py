"""The PyTorch bridge: `torch.compile(model, backend="xbench")` and `xb.torch.explain`; xbench operators as
torch operators (`custom_op`, `replace`); the library's kernels under an unchanged eager model (`enable`,
`enabled`, `stats`).

Importing it imports torch; `import xbench` alone does not (`xb.torch` is loaded on first use)."""
from .backend import Options, recording, xbench_backend
from .bisect import bisect as bisect
from .custom import CustomOp, XbenchModule, custom_op, replace
from .explain import explain
from .override import Stats, disable, enable, enabled, stats

__all__ = ["CustomOp", "Options", "Stats", "XbenchModule", "custom_op", "disable", "enable", "enabled", "explain",
           "recording", "replace", "stats", "xbench_backend"]
