"""A model torch.export cannot capture, split into pipeline stages by the pipelining tests."""

import torch


class Gate(torch.nn.Module):
    """A block torch.export cannot capture: its branch depends on the data."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x) if x.sum() > 0 else -self.lin(x)


class GatedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 8), Gate(), torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)])
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x * self.scale
