"""The package version, in one place (read by the root package and by dataset writers)."""

__version__ = "0.1.0"
