"""Lightning's Trainer learns the npu accelerator (torch_npu.contrib.lightning)."""

import sys

import torch

_PACKAGES = ("lightning.pytorch", "pytorch_lightning")


def _package_of(module_name):
    return next(p for p in _PACKAGES if module_name.startswith(p + "."))


def register_accelerator(module_name):
    from torch_npu.contrib.lightning import accelerator_for

    accelerator = accelerator_for(_package_of(module_name))
    accelerator.register_accelerators(sys.modules[module_name].AcceleratorRegistry)
    return True


def _uses_npu(connector, accelerator_class):
    flag = connector._accelerator_flag
    return flag == "npu" or isinstance(flag, accelerator_class)


def choose_npu_strategy_and_precision(module_name):
    from torch_npu.contrib.lightning import accelerator_for, precision_for

    package = _package_of(module_name)
    connector_class = sys.modules[module_name]._AcceleratorConnector
    accelerator = accelerator_for(package)
    strategies = sys.modules[f"{package}.strategies"]
    choose_strategy = connector_class._choose_strategy
    init_precision = connector_class._check_and_init_precision

    def _choose_strategy(self):
        # Lightning gives one device of an accelerator it does not know a CPU strategy.
        if _uses_npu(self, accelerator) and self._num_nodes_flag == 1 and len(self._parallel_devices) <= 1:
            device = self._parallel_devices[0] if self._parallel_devices else torch.device("npu", 0)
            return strategies.SingleDeviceStrategy(device=device)
        return choose_strategy(self)

    def _check_and_init_precision(self):
        # Lightning runs autocast on "cuda" for an accelerator it does not know.
        if (
            _uses_npu(self, accelerator)
            and self._precision_plugin_flag is None
            and self._precision_flag in ("16-mixed", "bf16-mixed")
            and not isinstance(self.strategy, (strategies.DeepSpeedStrategy, strategies.FSDPStrategy))
        ):
            self._validate_precision_choice()
            return precision_for(package)(self._precision_flag)
        return init_precision(self)

    connector_class._choose_strategy = _choose_strategy
    connector_class._check_and_init_precision = _check_and_init_precision
    return True


def wrap_ddp_on_an_npu_stream(module_name):
    strategy_class = sys.modules[module_name].DDPStrategy
    setup_model = strategy_class._setup_model

    def _setup_model(self, model):
        # Lightning builds DDP inside torch.cuda.stream(torch.cuda.Stream()) for any non-CPU device.
        if self.root_device.type != "npu":
            return setup_model(self, model)
        ddp = torch.nn.parallel.DistributedDataParallel
        with torch.npu.stream(torch.npu.Stream()):
            return ddp(module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)

    strategy_class._setup_model = _setup_model
    return True
