"""vnpu: the command line of the software Ascend NPU (``vnpu info``, ``vnpu demo``)."""

__version__ = "0.1.0"
