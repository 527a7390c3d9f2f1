import os
import tempfile

# Tests compile into a cache of their own unless one is given (CI sets XBENCH_CACHE_DIR through the Makefile).
os.environ.setdefault("XBENCH_CACHE_DIR", os.path.join(tempfile.gettempdir(), "xbench-test-cache"))
