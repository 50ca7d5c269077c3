"""torch_npu.utils._dynamo_device (the npu device interface under torch_npu's name) and torch_npu.utils._dynamo's
inductor registry (register / disable / enable / is-initialized), each checked in a fresh interpreter: what they
report depends on what the process imported before."""

from subprocess_helpers import run_python


def run_fresh(code):
    return run_python(code).stdout.split()


def test_the_interface_torch_npu_names_is_the_one_dynamo_uses_whatever_is_imported_first():
    out = run_fresh(
        """
        import torch, torch_npu
        from torch_npu.utils._dynamo_device import NpuInterface, current_device, set_device
        from torch_npu.utils._dynamo_device import _dynamo_register_interface_for_device
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("npu") is NpuInterface, get_interface_for_device("npu:1") is NpuInterface)
        print(current_device is torch.npu.current_device, set_device is torch.npu.set_device)
        print(_dynamo_register_interface_for_device(), get_interface_for_device("npu") is NpuInterface)
        """
    )
    assert out == ["True"] * 6


def test_registering_inductor_npu_can_be_disabled_and_enabled_again():
    out = run_fresh(
        """
        import sys, torch, torch_npu
        from torch_npu.utils import _dynamo
        def state():
            print(_dynamo.is_inductor_npu_initialized(), "torch_npu._inductor" in sys.modules)
        state()
        _dynamo.disable_register_inductor_npu()
        _dynamo.register_inductor_npu()
        state()
        _dynamo.enable_register_inductor_npu()
        _dynamo.register_inductor_npu()
        state()
        """
    )
    assert out == ["False", "False", "False", "False", "True", "True"]


def test_inductor_npu_imported_by_the_program_counts_as_initialized():
    out = run_fresh(
        """
        import torch, torch_npu
        import torch_npu._inductor
        from torch_npu.utils._dynamo import _InductorNpuRegistry, is_inductor_npu_initialized
        print(is_inductor_npu_initialized(), _InductorNpuRegistry._has_inited)
        """
    )
    assert out == ["True", "True"]
