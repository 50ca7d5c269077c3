"""Helpers shared by the profiler's analysis, at the import paths torch_npu gives them: the profiler constants
and log lines (_constant) and the CANN export capabilities (_cann_package_manager)."""
