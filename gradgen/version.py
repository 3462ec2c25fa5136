"""gradgen's version: written into every generated file's header and the cache's keys.

A leaf module (imports nothing), so the modules that need the version import it without
importing the package's face, :mod:`gradgen`, which sits above them.
"""

__version__ = "0.1.0"
