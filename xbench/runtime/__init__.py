"""The runtime: what `op(x)` does once an operator is traced. One specialisation per bound shape (traced once,
lowered once), the backend the call runs on, the tuned schedules it compiles with, and the artifacts compiled
for each. The torch bridge and the notebook magics run operators through this same layer."""
from ..lang.operator import install_dispatcher
from .dispatch import Runtime, Specialization, default_backend, runtime, set_default_backend

install_dispatcher(runtime)

__all__ = ["Runtime", "Specialization", "default_backend", "runtime", "set_default_backend"]
