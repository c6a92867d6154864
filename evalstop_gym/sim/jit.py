"""Where the compiled engine's machine code is cached: a per-user cache folder, never the package.

numba's `cache=True` writes `.nbi`/`.nbc` files beside the source: inside site-packages for an
installed package. There they fail on a read-only install, and they outlive an uninstall, leaving
a namespace package that shadows the next install. So the kernel's cache lives under the user's
cache folder (`platformdirs`; `EVALSTOP_CACHE_DIR` overrides it), in a subfolder keyed by the
package version and a hash of each source file, and caching is off when no such folder can be
written. A `NUMBA_CACHE_DIR` set by the user wins, as numba documents. Without numba, `njit`
returns the plain Python functions (slow, debuggable with pdb).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]   # evalstop_gym/: the files cached here
SIM_DIR = Path(__file__).resolve().parent


def package_version() -> str:
    try:
        return metadata.version("evalstop-gym")
    except metadata.PackageNotFoundError:   # run from a source tree that was never installed
        return "source"


def cache_root() -> Path:
    """The folder for this version's compiled code (it may not exist yet)."""
    override = os.environ.get("EVALSTOP_CACHE_DIR")
    if override:
        base = Path(override)
    else:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("evalstop-gym", appauthor=False))
    return base / "numba" / package_version()


def writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


@functools.cache
def source_digest(path: str) -> str:
    """The file's content hash; for the engine's own files, over all of them, as a compiled
    function inlines what it calls from its neighbours (`rules.py`, `pace.py`): a change to any
    must miss the cache."""
    sources = [Path(path)]
    if Path(path).resolve().parent == SIM_DIR:
        sources = sorted(SIM_DIR.glob("*.py"))
    elif Path(path).resolve().is_relative_to(PACKAGE_DIR):   # compiled code beside the engine
        # (env/batch_step.py) links the engine's functions and its neighbours' formulas in
        sources = sorted({*SIM_DIR.glob("*.py"), *Path(path).resolve().parent.glob("*.py")})
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


try:
    import numba
    from numba.core import caching
    from numba.core import config as numba_config
    HAS_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAS_NUMBA = False


if HAS_NUMBA:
    class PackageCacheLocator(caching._CacheLocator):
        """Caches this package's jitted functions under `cache_root()/<file>-<source hash>`."""

        def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
            self._lineno = py_func.__code__.co_firstlineno
            self._digest = source_digest(py_file)
            self._path = cache_root() / f"{Path(py_file).stem}-{self._digest}"

        def get_cache_path(self) -> str:
            return str(self._path)

        def get_source_stamp(self) -> str:
            return self._digest   # the content, not the mtime: a reinstall of the same code hits

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Callable[..., Any],
                          py_file: str) -> PackageCacheLocator | None:
            # numba.core.config sets its settings through globals(), which mypy cannot see
            cache_dir = numba_config.CACHE_DIR  # type: ignore[attr-defined]
            if cache_dir or not Path(py_file).resolve().is_relative_to(PACKAGE_DIR):
                return None   # the user's NUMBA_CACHE_DIR, or another package's function
            locator = cls(py_func, py_file)
            try:
                locator.ensure_cache_path()
            except OSError:   # became unwritable since import: a throwaway folder, never the tree
                locator._path = Path(tempfile.mkdtemp(prefix="evalstop-numba-"))
            return locator

    if PackageCacheLocator not in caching.CacheImpl._locator_classes:
        caching.CacheImpl._locator_classes.insert(0, PackageCacheLocator)


CACHING = HAS_NUMBA and (bool(os.environ.get("NUMBA_CACHE_DIR"))
                                 or writable(cache_root()))


def njit(*args: Any, **kwargs: Any) -> Any:
    """numba's `njit`, caching in the user's cache folder when it can be written."""
    if not HAS_NUMBA:
        if args and callable(args[0]):
            return args[0]
        return lambda fn: fn
    kwargs["cache"] = kwargs.get("cache", True) and CACHING
    return numba.njit(*args, **kwargs)


def jitable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Lets compiled code call the plain function `fn` (numba's `register_jitable`); returns `fn`
    itself, so plain Python calls stay plain."""
    if not HAS_NUMBA:
        return fn
    from numba.extending import register_jitable

    return register_jitable(fn)
