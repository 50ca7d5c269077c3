"""npu_top_k_top_p_sample: top-k, top-p and min-p filtering of [B, V] logits followed by a sample per row
(aclnnTopKTopPSampleV2).

Per row b, on the logits sorted in descending order (stable, so ties keep the lower index first):
- top-k keeps the first k[b] when 1 <= k[b] <= min(V, ks_max), otherwise the stage is skipped;
- the kept values become probabilities (softmax; with input_is_logits=False they already are probabilities
  and are divided by their sum);
- top-p keeps a position while the probability mass before it is <= p[b] when 0 < p[b] < 1, only the
  largest when p[b] <= 0, everything when p[b] >= 1;
- min-p keeps the probabilities >= min_ps[b] * the largest when 0 < min_ps[b] < 1, only the largest when
  min_ps[b] >= 1;
- the survivors' probabilities, renormalised, are sampled: qSample takes argmax(probs / (q + eps)) with q read
  position by position in the sorted order (in vocabulary order when no filter is active); multiNomial draws
  one index with torch's multinomial from `generator` (or the default npu generator) whatever q holds, as
  torch_npu does; without q, or with post_sample "None", the largest is taken.
Returns logits_select_idx int64 [B] and logits_top_kp_select float32 [B, V]: with is_need_logits the input
logits where they survived and the invalid value (-inf, or 0 when input_is_logits=False) elsewhere; otherwise
zeros (the card leaves that buffer unwritten). top_k_guess only selects the card's faster top-p path; the
result does not depend on it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_top_k_top_p_sample"
_KS_LIMIT = 1024


def _probabilities(values, keep, input_is_logits):
    if input_is_logits:
        return values.masked_fill(~keep, float("-inf")).softmax(-1)
    kept = values.masked_fill(~keep, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def _check_inputs(logits, top_k, top_p, q, min_ps, ks_max, post_sample):
    check(
        logits.dim() == 2 and logits.numel() > 0,
        _OP,
        f"logits must be a non-empty 2-D [B, V] tensor, got {tuple(logits.shape)}",
    )
    check(
        logits.dtype in (torch.float16, torch.bfloat16, torch.float32),
        _OP,
        f"logits must be float16, bfloat16 or float32, got {logits.dtype}",
    )
    batch = logits.shape[0]
    for name, t in (("top_k", top_k), ("top_p", top_p), ("min_ps", min_ps)):
        if t is None:
            continue
        check(
            t.dim() == 1 and t.shape[0] == batch,
            _OP,
            f"{name} must be 1-D [B={batch}], got {tuple(t.shape)}",
        )
    check(top_k.dtype == torch.int32, _OP, f"top_k must be int32, got {top_k.dtype}")
    check(ks_max >= 1, _OP, f"ks_max must be a positive integer, got {ks_max}")
    check(
        post_sample in ("qSample", "multiNomial", "None"),
        _OP,
        f"post_sample must be 'qSample', 'multiNomial' or 'None', got {post_sample!r}",
    )
    if q is not None and post_sample == "qSample":
        check(
            q.dtype == torch.float32 and tuple(q.shape) == tuple(logits.shape),
            _OP,
            f"q must be float32 {list(logits.shape)} for qSample, got {q.dtype} {list(q.shape)}",
        )


@npu_op(
    "npu_top_k_top_p_sample(Tensor logits, Tensor top_k, Tensor top_p, Tensor? q=None, float? eps=1e-8, "
    "bool? is_need_logits=False, int? top_k_guess=32, Tensor? min_ps=None, int? ks_max=1024, "
    "bool? input_is_logits=True, str? post_sample='qSample', Generator? generator=None) -> (Tensor, Tensor)"
)
def npu_top_k_top_p_sample(
    logits,
    top_k,
    top_p,
    q=None,
    eps=1e-8,
    is_need_logits=False,
    top_k_guess=32,
    min_ps=None,
    ks_max=1024,
    input_is_logits=True,
    post_sample="qSample",
    generator=None,
):
    eps = 1e-8 if eps is None else eps
    ks_max = min(_KS_LIMIT if ks_max is None else ks_max, _KS_LIMIT)
    input_is_logits = True if input_is_logits is None else input_is_logits
    post_sample = "qSample" if post_sample is None else post_sample
    _check_inputs(logits, top_k, top_p, q, min_ps, ks_max, post_sample)
    batch, vocab = logits.shape
    values, order = torch.sort(logits.float(), dim=-1, descending=True, stable=True)
    position = torch.arange(vocab, device=logits.device).expand(batch, vocab)
    first = position == 0

    k = top_k.long().unsqueeze(-1)
    k_active = (k >= 1) & (k <= min(vocab, ks_max))
    keep = ~k_active | (position < k)
    probs = _probabilities(values, keep, input_is_logits)

    p = top_p.float().unsqueeze(-1)
    before = probs.cumsum(-1) - probs
    p_active = p < 1
    keep = keep & torch.where(p <= 0, first, ~p_active | (before <= p))

    min_active = torch.zeros_like(p_active)
    if min_ps is not None:
        m = min_ps.float().unsqueeze(-1)
        min_active = m > 0
        scaled = _probabilities(values, keep, input_is_logits)
        threshold = scaled.amax(-1, keepdim=True) * m
        keep = keep & torch.where(m >= 1, first, ~min_active | (scaled >= threshold))
    probs = _probabilities(values, keep, input_is_logits)

    if post_sample == "multiNomial":
        chosen = torch.multinomial(probs, 1, generator=generator)
    elif q is None or post_sample == "None":
        chosen = torch.zeros(batch, 1, dtype=torch.long, device=logits.device)
    else:
        filtered = k_active | p_active | (p <= 0) | min_active
        q_sorted = torch.where(filtered, q, q.gather(-1, order))
        chosen = (probs / (q_sorted + eps)).argmax(-1, keepdim=True)
    select_idx = order.gather(-1, chosen).squeeze(-1)

    if is_need_logits:
        survived = torch.zeros_like(keep).scatter_(-1, order, keep)
        invalid = float("-inf") if input_is_logits else 0.0
        top_kp = logits.float().masked_fill(~survived, invalid)
    else:
        top_kp = torch.zeros(batch, vocab, dtype=torch.float32, device=logits.device)
    return select_idx, top_kp
