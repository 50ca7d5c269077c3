"""vnpu's version: the one place it is written (pyproject.toml reads it, torch_npu.__version__ builds on it)."""

__version__ = "0.1.0"
