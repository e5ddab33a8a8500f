"""The package version (one place: the package, the CLI and the validation records read it)."""
__version__ = "0.1.0"
