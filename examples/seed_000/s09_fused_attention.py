# context
import torch
import torch_npu

from torch_npu.nn import FusedAttention


class Encoder(torch.nn.Module):  # context: the article's model
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        # 替换原始MultiHeadAttention
        self.attn = FusedAttention(embed_dim, num_heads)

    def forward(self, x):
        return self.attn(x, x, x)[0]


x = torch.randn(5, 2, 16).npu()
print(tuple(Encoder(16, 4).npu()(x).shape))
