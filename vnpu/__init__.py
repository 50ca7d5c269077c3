"""vnpu: the command line of the software Ascend NPU (``vnpu info``, ``vnpu demo``)."""

from vnpu._version import __version__  # noqa: F401
