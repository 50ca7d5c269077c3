"""torch_npu.testing._internal: the test helpers under the private names torch_npu's newer test files import
(common_utils, common_distributed, common_dtensor)."""
