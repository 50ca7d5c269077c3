"""MultiheadAttention of torch_npu's contrib (fairseq's layer, batch-major 2-D inputs).

query/key/value are [bsz * len, embed_dim] rows ordered batch first; forward(query, key, value, bsz,
tgt_len, s_len, ...) returns ([bsz * tgt_len, embed_dim], weights [bsz, tgt_len, s_len] averaged over
heads, or per head [heads, bsz, tgt_len, s_len] with need_head_weights). attn_mask is added to the
scores; key_padding_mask [bsz, s_len] (True = padding) masks keys. q is scaled by head_dim ** -0.5.

After MHAConfig.set_fussion() the layer runs torch_npu.npu_multi_head_attention instead, as torch_npu does:
key and value are used as given, key_padding_mask is the operator's additive attn_mask
[bsz, heads, tgt_len, s_len], and forward returns (output, None). (torch_npu's own layer returns (None, None)
without fusion; vnpu computes the unfused path instead.)
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import torch_npu
from torch_npu.contrib.function.matmul_transpose import matmul_transpose

__all__ = ["MultiheadAttention", "Matmul_transpose"]


class MHAConfig:
    """Whether MultiheadAttention runs the fused npu_multi_head_attention operator."""

    use_fussion_mha = False

    @classmethod
    def set_fussion(cls):
        cls.use_fussion_mha = True


def Matmul_transpose(tensor1, tensor2):
    """tensor1 @ tensor2^T over the last two dimensions."""
    return matmul_transpose(tensor1, tensor2)


class MultiheadAttention(nn.Module):
    def __init__(
        self,
        embed_dim,
        num_heads,
        kdim=None,
        vdim=None,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        self_attention=False,
        encoder_decoder_attention=False,
        q_noise=0.0,
        qn_block_size=8,
    ):
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.qkv_same_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim**-0.5
        self.self_attention = self_attention
        self.encoder_decoder_attention = encoder_decoder_attention
        if self_attention and not self.qkv_same_dim:
            raise ValueError("Self-attention requires query, key and value to be of the same size")
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.onnx_trace = False
        self.tpu = False
        self.reset_parameters()

    def prepare_for_onnx_export_(self):
        self.onnx_trace = True

    def prepare_for_tpu_(self, **kwargs):
        self.tpu = True

    def reset_parameters(self):
        gain = 1 / 2**0.5 if self.qkv_same_dim else 1.0
        for proj in (self.k_proj, self.v_proj, self.q_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)

    def transpose_for_scores(self, x):
        """[bsz, len, embed] -> [bsz, heads, len, head_dim]."""
        return x.view(x.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def apply_sparse_mask(self, attn_weights, tgt_len: int, src_len: int, bsz: int):
        return attn_weights

    def multi_attn(self, query, key, value, key_padding_mask, bsz, tgt_len):
        """Scaled scores of projected [bsz, heads, len, head_dim] tensors, masked by key_padding_mask."""
        scores = matmul_transpose(query, key)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :].to(torch.bool), float("-inf"))
        return scores

    def forward(
        self,
        query,
        key: Tensor | None,
        value: Tensor | None,
        bsz,
        tgt_len,
        s_len,
        key_padding_mask: Tensor | None = None,
        incremental_state: dict[str, dict[str, Tensor | None]] | None = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Tensor | None = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if MHAConfig.use_fussion_mha:
            return self._fused_attention(query, key, value, key_padding_mask, bsz, tgt_len), None
        if incremental_state is not None:
            raise NotImplementedError(
                "torch_npu.contrib.MultiheadAttention: incremental decoding (incremental_state) "
                "is not implemented in vnpu; call it without incremental_state"
            )
        if need_head_weights:
            need_weights = True
        if self.self_attention:
            key = value = query
        q = self.q_proj(query) * self.scaling
        k = self.k_proj(key)
        v = self.v_proj(value)
        q = self.transpose_for_scores(q.view(bsz, tgt_len, self.embed_dim))
        k = self.transpose_for_scores(k.view(bsz, s_len, self.embed_dim))
        v = self.transpose_for_scores(v.view(bsz, s_len, self.embed_dim))
        if self.bias_k is not None:
            k = torch.cat([k, self.transpose_for_scores(self.bias_k.expand(bsz, 1, self.embed_dim))], dim=2)
            v = torch.cat([v, self.transpose_for_scores(self.bias_v.expand(bsz, 1, self.embed_dim))], dim=2)
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        if self.add_zero_attn:
            k = torch.cat([k, k.new_zeros(k.shape[:2] + (1, self.head_dim))], dim=2)
            v = torch.cat([v, v.new_zeros(v.shape[:2] + (1, self.head_dim))], dim=2)
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        src_len = k.size(2)
        scores = self.multi_attn(q, k, v, key_padding_mask, bsz, tgt_len)
        scores = self.apply_sparse_mask(scores, tgt_len, src_len, bsz)
        if attn_mask is not None:
            scores = scores + attn_mask
        if before_softmax:
            return scores, v
        probs_float = F.softmax(scores.float(), dim=-1)
        probs = F.dropout(probs_float.type_as(scores), p=self.dropout, training=self.training)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(bsz * tgt_len, self.embed_dim)
        attn = self.out_proj(context)
        weights = None
        if need_weights:
            weights = probs_float.permute(1, 0, 2, 3)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return attn, weights

    def _fused_attention(self, query, key, value, attn_mask, bsz, tgt_len):
        src_len = key.size(0) // bsz
        dropout_prob = self.dropout if self.training else 0.0
        dropout_mask = None
        if dropout_prob > 0:
            shape = (bsz, self.num_heads, tgt_len, src_len)
            dropout_mask = torch_npu.npu_dropout_gen_mask(shape, dropout_prob, dtype=query.dtype, device=query.device)
        return torch_npu.npu_multi_head_attention(
            query,
            key,
            value,
            self.q_proj.weight,
            self.k_proj.weight,
            self.v_proj.weight,
            attn_mask,
            self.out_proj.weight,
            self.q_proj.bias,
            self.k_proj.bias,
            self.v_proj.bias,
            self.out_proj.bias,
            dropout_mask,
            self.num_heads,
            self.head_dim,
            src_len,
            tgt_len,
            dropout_prob,
            True,
        )[0]

    def upgrade_state_dict_named(self, state_dict, name):
        """Split fairseq's old fused in_proj_weight/in_proj_bias into q/k/v projections."""
        prefix = name + "." if name != "" else ""
        for suffix in ("weight", "bias"):
            fused = prefix + "in_proj_" + suffix
            if fused in state_dict:
                q, k, v = state_dict.pop(fused).chunk(3, dim=0)
                state_dict[prefix + "q_proj." + suffix] = q
                state_dict[prefix + "k_proj." + suffix] = k
                state_dict[prefix + "v_proj." + suffix] = v
