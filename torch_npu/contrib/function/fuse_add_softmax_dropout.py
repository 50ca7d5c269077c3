"""fuse_add_softmax_dropout: BERT's attention-probability block in one call."""

import math

import torch.nn.functional as F

__all__ = ["fuse_add_softmax_dropout"]


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """dropout(softmax(attn_scores / sqrt(attn_head_size) + attn_mask, dim)): dropout with
    probability p while training, the given dropout module otherwise."""
    scores = attn_scores * (1.0 / math.sqrt(attn_head_size)) + attn_mask
    probs = F.softmax(scores, dim=dim)
    if training:
        return F.dropout(probs, p=p, training=True)
    return dropout(probs)
