"""Helpers shared by the profiler's analysis, at the import paths torch_npu gives them: the profiler constants
and log lines (_constant), the CANN export capabilities (_cann_package_manager) and time ranges with their
communication / computation overlap (_time_range_calculator), the parts of a result directory (_path_manager)
and its JSON files (_file_manager)."""
