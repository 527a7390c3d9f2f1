"""tests/profile is a test package; with pytest's default (prepend) import mode it sits on sys.path as a
top-level `profile`, shadowing the standard library module that torch imports through cProfile. Import
cProfile (with the standard library's profile) first, then free the name `profile` for that test package,
so the PyTorch cross-checks in this folder can import torch whatever order pytest collects in."""
import importlib
import sys

if "cProfile" not in sys.modules:
    _saved = sys.modules.pop("profile", None)
    _tests = [p for p in sys.path if p.rstrip("/").endswith("/tests")]
    for _p in _tests:
        sys.path.remove(_p)
    try:
        importlib.import_module("cProfile")
    finally:
        sys.path[:0] = _tests
        sys.modules.pop("profile", None)
        if _saved is not None:
            sys.modules["profile"] = _saved
