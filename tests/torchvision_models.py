"""torchvision models without the network: pretrained weights cannot be downloaded on this machine,
so `pretrained=True` / `weights=...` get the freshly initialised weights of the same architecture."""

import importlib.util


def use_initialised_weights():
    """torchvision with weight downloads replaced by fresh initialisation; None when not installed."""
    if importlib.util.find_spec("torchvision") is None:
        return None
    import torchvision
    from torchvision.models import _api

    def initialised_weights(self, *args, **kwargs):
        builder = _api.get_model_builder(self.__class__.__name__.replace("_Weights", "").lower())
        return builder(weights=None).state_dict()

    _api.WeightsEnum.get_state_dict = initialised_weights
    return torchvision
