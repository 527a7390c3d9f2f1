"""numba's on-disk cache (`cache=True`) for xbench's functions, checked on load.

numba keeps an index (`.nbi`) and one data file (`.nbc`) per compiled signature and unpickles them without a
checksum: a torn, truncated or bit-flipped file failed every later compile of that kernel ("invalid load key"),
or could load wrong machine code; and two processes saving different signatures of one function at once can
leave the index naming the other's data file. For functions defined in xbench's package or in its cache
directory (the generated modules), the files are sealed here like every other cache entry (`xbench.cache.seal`)
and each data file holds the key it was written for: one that does not check out is a cache miss, compiled
again and rewritten. A cache that cannot be written (a read-only folder, a full disk) costs the next process a
compile, never this one its result. numba's own format is kept for every other function in the process.
"""
from __future__ import annotations

import os
import pickle

from numba.core import caching

from ...cache import discard, seal, unseal
from ...config import cache_root, log

_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_warned: set[str] = set()


class CheckedCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files, each sealed with its checksum."""

    def _load_index(self):
        try:
            with open(self._index_path, "rb") as f:
                raw = f.read()
        except OSError:
            return {}
        body = unseal(raw)
        try:
            version, stamp, overloads = pickle.loads(body) if body is not None else (None, None, None)
        except Exception:                     # sealed, yet not what this module writes
            body = None
        if body is None:
            discard(self._index_path, "numba index without a valid checksum")
            return {}
        if version != self._version or stamp != self._source_stamp or not isinstance(overloads, dict):
            return {}
        return overloads

    def _save_index(self, overloads):
        data = seal(self._dump((self._version, self._source_stamp, overloads)))
        with self._open_for_write(self._index_path) as f:
            f.write(data)

    def _load_data(self, name):
        path = self._data_path(name)
        with open(path, "rb") as f:
            raw = f.read()
        body = unseal(raw)
        if body is None:
            discard(path, "numba data without a valid checksum")
            raise OSError(f"{path}: damaged")  # numba's load() takes an OSError for a missing entry
        return pickle.loads(body)

    def _save_data(self, name, data):
        sealed = seal(self._dump(data))
        with self._open_for_write(self._data_path(name)) as f:
            f.write(sealed)

    def load(self, key):
        try:
            stored = super().load(key)
        except Exception as exc:              # an entry that unpickles to nonsense: compile again
            log.warning("numba cache entry in %s could not be loaded (%s); compiling again", self._cache_path, exc)
            return None
        # a data file holds the key it was written for: two processes saving different signatures of one
        # function at once can leave the index naming another's data, which must not load as this one's
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
            return None
        return stored[1]

    def save(self, key, data):
        try:
            super().save(key, (key, data))
        except OSError as exc:                # read-only folder, full disk: the compiled code is still used
            if self._cache_path not in _warned:
                _warned.add(self._cache_path)
                log.warning("cannot write numba's cache in %s (%s); compiled code is used but not kept",
                            self._cache_path, exc.strerror or exc)


def _ours(py_func) -> bool:
    try:
        path = os.path.abspath(py_func.__code__.co_filename)
    except AttributeError:
        return False
    return path.startswith(_PKG) or path.startswith(str(cache_root()) + os.sep)


def install() -> None:
    """Check the cache files of every xbench function numba caches from now on in this process."""
    if getattr(caching.Cache.__init__, "_xbench_checked", False):
        return
    needed = ("_load_index", "_save_index", "_load_data", "_save_data", "_dump", "_open_for_write", "_data_path")
    if not all(hasattr(caching.IndexDataCacheFile, n) for n in needed):   # a numba whose cache files differ
        log.debug("numba's cache files are not checked: this numba's IndexDataCacheFile differs")
        return
    original = caching.Cache.__init__

    def __init__(self, py_func):
        original(self, py_func)
        if _ours(py_func) and type(self._cache_file) is caching.IndexDataCacheFile:
            self._cache_file.__class__ = CheckedCacheFile

    __init__._xbench_checked = True
    caching.Cache.__init__ = __init__


install()
