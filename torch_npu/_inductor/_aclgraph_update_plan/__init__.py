"""The compile-time half of ACL graph update plans (torch_npu.npu._aclgraph_update_plan): codegen builds a
plan entry for each operator of a compiled graph whose graph handler has update specs."""

__all__ = []
