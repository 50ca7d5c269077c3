# A test file written the way torch_npu's own operator tests are written; it must run unchanged.
import numpy as np
import torch

import torch_npu
from torch_npu.testing.common_utils import SupportedDevices, create_common_tensor
from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests
from torch_npu.testing.testcase import TestCase, run_tests


class TestAbs(TestCase):
    def cpu_op_exec(self, input1):
        return torch.abs(input1).numpy()

    def npu_op_exec(self, input1):
        return torch.abs(input1).to("cpu").numpy()

    def test_abs_shape_format_fp32(self, device="npu"):
        format_list = [0, 3, 29]
        shape_list = [[5, 6, 7, 8], [16, 32]]
        shape_format = [[np.float32, i, j] for i in format_list for j in shape_list]
        for item in shape_format:
            cpu_input, npu_input = create_common_tensor(item, -10, 10)
            self.assertRtolEqual(self.cpu_op_exec(cpu_input), self.npu_op_exec(npu_input))

    def test_abs_fp16(self):
        cpu_input, npu_input = create_common_tensor([np.float16, -1, [4, 4]], -1, 1)
        self.assertRtolEqual(cpu_input.abs().numpy(), npu_input.abs().cpu().numpy())

    @SupportedDevices(["Ascend910B"])
    def test_only_on_910b(self):
        self.assertEqual(torch.ones(2, device="npu"), torch.ones(2))

    @SupportedDevices(["Ascend310P"])
    def test_only_on_310p(self):
        self.fail("must be skipped on Ascend910B1")


@instantiate_tests
class TestAddGenerated(TestCase):
    @Dtypes(torch.float32, torch.float16)
    @Formats(2, 29)
    def test_add(self, device, dtype, npu_format):
        a = torch.randn(4, 4).to(dtype)
        b = torch_npu.npu_format_cast(a.to(device), npu_format)
        self.assertEqual(torch_npu.get_npu_format(b), npu_format)
        self.assertRtolEqual((a + a).float(), (b + b).cpu().float())


@instantiate_tests
class TestCastGenerated(TestCase):
    @Dtypes(torch.float32, torch.int32)
    def test_cast(self, dtype):
        npu = torch.arange(4, device="npu").to(dtype)
        self.assertEqual(npu.storage(), torch.arange(4).to(dtype).storage())
        self.assertEqual(npu.shape, (4,))
        self.assertExpectedInline(str(npu.dtype).split(".")[1], f"""{str(dtype).split(".")[1]}""")


if __name__ == "__main__":
    run_tests()
