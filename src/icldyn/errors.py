"""The errors icldyn raises for bad input, each ``str(err)`` a single line fit for the terminal (bottom of the
import graph: every layer may raise them)."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad configuration input; ``str(err)`` is a single line fit for the terminal."""
