# A test file written the way torch_npu's newer test files are written: the harness under its private names
# (torch_npu.testing._testcase, torch_npu.testing._internal.*) and a DTensor test over npu ranks; it must run
# unchanged.
import numpy as np
import torch
from torch.distributed.tensor import Shard, distribute_tensor

import torch_npu
from torch_npu.testing._decorator import Dtypes, instantiate_tests
from torch_npu.testing._internal.common_distributed import skipIfUnsupportMultiNPU, with_comms
from torch_npu.testing._internal.common_dtensor import NPUDTensorTestBase
from torch_npu.testing._internal.common_utils import create_common_tensor
from torch_npu.testing._testcase import TestCase, run_tests


class TestDtypeCast(TestCase):
    def test_cast_to_half(self):
        cpu_input, npu_input = create_common_tensor([np.float32, -1, [4, 6]], -2, 2)
        self.assertRtolEqual(cpu_input.half().numpy(), torch_npu.npu_dtype_cast(npu_input, torch.half).cpu().numpy())


@instantiate_tests
class TestIndexing(TestCase):
    @Dtypes(torch.float, torch.int8)
    def test_first_two_rows_and_columns(self, dtype):
        x = torch.arange(10).reshape(2, 5).npu().to(dtype)
        self.assertRtolEqual(x[:2, :2], torch_npu.npu_indexing(x, [0, 0], [2, 2], [1, 1]))


class TestShardedRowSum(NPUDTensorTestBase):
    @property
    def world_size(self):
        return 2

    @skipIfUnsupportMultiNPU(2)
    @with_comms
    def test_row_sum_of_a_sharded_tensor(self):
        mesh = self.build_device_mesh()
        full = torch.arange(24, dtype=torch.float32, device=self.device_type).reshape(4, 6)
        sharded = distribute_tensor(full, mesh, [Shard(0)])
        self.assertEqual(sharded.to_local().device.type, "npu")
        self.assertEqual(sharded.to_local().shape, (2, 6))
        self.assertEqual(sharded.sum(dim=1).full_tensor().cpu(), full.sum(dim=1).cpu())


if __name__ == "__main__":
    run_tests()
