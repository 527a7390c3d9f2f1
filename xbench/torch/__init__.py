"""The PyTorch bridge: `torch.compile(model, backend="xbench")`, and `xb.torch.explain`.

Importing it imports torch; `import xbench` alone does not (`xb.torch` is loaded on first use)."""
from .backend import Options, recording, xbench_backend
from .explain import explain

__all__ = ["Options", "explain", "recording", "xbench_backend"]
