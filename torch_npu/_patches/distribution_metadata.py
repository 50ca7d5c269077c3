"""The installed-distribution record of torch_npu that vnpu answers for.

vnpu is installed as the distribution ``vnpu``; its import package is ``torch_npu``. Programs that look
for torch_npu by its distribution (``importlib.metadata.version("torch_npu")``, as diffusers does to
decide whether to call ``npu_geglu`` / ``npu_rms_norm`` / ``npu_fusion_attention``) found nothing and
took their non-Ascend paths. A distribution finder placed after Python's own answers for the name
torch_npu (torch-npu, Torch_NPU ...) with vnpu's torch_npu version; a real torch_npu's dist-info on
sys.path would be found first.
"""

import importlib.metadata
import os
import sys
import textwrap

import torch_npu

DISTRIBUTION_NAME = "torch_npu"


class TorchNpuDistribution(importlib.metadata.Distribution):
    """torch_npu's metadata, written by vnpu: the version of its torch_npu API and where the package is."""

    def read_text(self, filename):
        if filename == "METADATA":
            return textwrap.dedent(f"""\
                Metadata-Version: 2.1
                Name: {DISTRIBUTION_NAME}
                Version: {torch_npu.__version__}
                Summary: torch_npu's API provided by vnpu, a software Ascend NPU on the host CPU
                Requires-Dist: torch=={torch_npu.__version__.split("+")[0]}
                """)
        if filename == "top_level.txt":
            return "torch_npu\n"
        return None

    def locate_file(self, path):
        return os.path.join(os.path.dirname(os.path.dirname(torch_npu.__file__)), str(path))


class TorchNpuDistributionFinder(importlib.metadata.DistributionFinder):
    """Finds TorchNpuDistribution by name; listed with every distribution too (packages_distributions)."""

    def find_spec(self, fullname, path, target=None):
        return None  # finds distributions, never modules

    def find_distributions(self, context=None):
        name = None if context is None else context.name
        if name is not None and importlib.metadata.Prepared.normalize(name) != DISTRIBUTION_NAME:
            return iter(())
        return iter((TorchNpuDistribution(),))


def provide_distribution():
    if any(isinstance(finder, TorchNpuDistributionFinder) for finder in sys.meta_path):
        return False
    sys.meta_path.append(TorchNpuDistributionFinder())
    return True
