"""The package's version, apart from ``glassagent/__init__.py`` so that any module can read it."""

__version__ = "0.1.0.dev0"
