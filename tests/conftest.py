import os
import tempfile

# Tests compile into a cache of their own unless one is given (CI sets XBENCH_CACHE_DIR through the Makefile).
os.environ.setdefault("XBENCH_CACHE_DIR", os.path.join(tempfile.gettempdir(), "xbench-test-cache"))
# Test files run side by side on every core: OpenMP threads that spin at barriers while the other processes hold
# the cores would turn each parallel kernel call into milliseconds of waiting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
