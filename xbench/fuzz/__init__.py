"""Differential fuzzing of the compiler: random well-typed operators run on every backend and compared with
the reference (`python -m xbench fuzz`)."""
