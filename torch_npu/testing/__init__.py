"""torch_npu.testing: the harness torch_npu's own test files import (TestCase, run_tests,
create_common_tensor, Dtypes/Formats/instantiate_tests ...), so such files run unchanged on vnpu."""
