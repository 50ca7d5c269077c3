"""torch_npu.utils.asd_detector: the older import path of set_asd_loss_scale and register_asd_hook."""

from torch_npu.utils._asd_detector import register_asd_hook, set_asd_loss_scale

__all__ = ["set_asd_loss_scale", "register_asd_hook"]
