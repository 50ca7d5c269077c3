"""BiLSTM: a bidirectional LSTM made of a forward and a backward single-direction LSTM."""

import torch
from torch import nn

__all__ = ["BiLSTM"]


class BiLSTM(nn.Module):
    """inputs [T, N, input_size] -> [T, N, 2 * hidden_size] (forward and backward outputs concatenated)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.fw_rnn = nn.LSTM(input_size, hidden_size, bidirectional=False)
        self.bw_rnn = nn.LSTM(input_size, hidden_size, bidirectional=False)

    def forward(self, inputs):
        fw_out, _ = self.fw_rnn(inputs)
        bw_out, _ = self.bw_rnn(torch.flip(inputs, [0]))
        return torch.cat([fw_out, torch.flip(bw_out, [0])], dim=-1)
