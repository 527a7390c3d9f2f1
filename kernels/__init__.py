"""The xbench operator library, written only in the public xbench language (`import xbench as xb`).

Modules register operators with `@xb.ops.register("<category>")`; users reach them as `xb.ops.<name>`.
Semantics follow PyTorch (argument names, defaults, broadcasting, `dim`/`keepdim`).
"""
