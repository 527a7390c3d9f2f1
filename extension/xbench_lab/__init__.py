"""The JupyterLab extension of xbench, shipped prebuilt (no node needed to install it)."""
try:
    from ._version import __version__
except ImportError:  # a source checkout that was never built
    __version__ = "dev"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "@xbench/lab"}]
