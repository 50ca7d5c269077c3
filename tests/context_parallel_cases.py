"""Context parallelism on npu device meshes (distributed_worker.py runs these on every rank).

A sequence of 16 (per batch and head) is sharded over the ranks; attention runs as PyTorch's ring. Each rank builds
the full inputs from one seed, so each result is checked against attention over the whole sequence computed here,
and, without load balancing, bit for bit against the same ring merge written out on the CPU."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from distributed_rank import DEV, RANK, WORLD
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.experimental._attention import (
    _cp_options,
    _disable_context_parallel_dispatcher,
    _enable_context_parallel_dispatcher,
)
from torch.distributed.tensor.experimental._context_parallel._attention import _SDPAMerger

import torch_npu
from torch_npu.distributed.tensor.experimental import context_parallel
from torch_npu.distributed.tensor.experimental._context_parallel import context_parallel_unshard, set_rotate_method

SEQ = 16


def _inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.randn(2, 2, SEQ, 8, dtype=dtype) for _ in range(3)]


def _full_attention(q, k, v, is_causal):
    leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=is_causal)
    out.backward(_grad_of(out))
    return out.detach(), [t.grad for t in leaves]


def _grad_of(out):
    return torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).view(out.shape)


def _ring_attention(mesh, q, k, v, is_causal):
    """Output and input gradients of SDPA inside context_parallel, unsharded (in sequence order)."""
    (local_grad,) = _shard_like(mesh, [_grad_of(q.to(DEV))])
    buffers = [t.to(DEV) for t in (q, k, v)]
    with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
        leaves = [b.detach().requires_grad_() for b in buffers]
        out = F.scaled_dot_product_attention(*leaves, is_causal=is_causal)
        assert type(out) is torch.Tensor and out.device == DEV and out.shape[2] == SEQ // WORLD, out
        out.backward(local_grad)
    return context_parallel_unshard(mesh, [out.detach()] + [t.grad for t in leaves], [2, 2, 2, 2])


def _shard_like(mesh, tensors):
    """The shard of each tensor this rank holds inside context_parallel (load balancing included)."""
    copies = [t.clone() for t in tensors]
    with context_parallel(mesh, buffers=copies, buffer_seq_dims=[2] * len(copies), no_restore_buffers=set(copies)):
        return [c.clone() for c in copies]


def _close(got, want, atol):
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=atol)


def _ring_written_out_on_cpu(q, k, v, is_causal):
    """This rank's output of the ring without load balancing: its query shard against every key/value shard from
    its own down to rank 0 and around (steps past the diagonal skipped when causal), merged as PyTorch merges."""
    sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    chunks = [[c.contiguous() for c in t.chunk(WORLD, dim=2)] for t in (q, k, v)]
    merger = _SDPAMerger(_cp_options.convert_to_f32, seq_dim=2)
    for step in range(WORLD):
        source = (RANK - step) % WORLD
        if is_causal and step > RANK:
            continue
        out, lse = sdpa(chunks[0][RANK], chunks[1][source], chunks[2][source], is_causal=is_causal and step == 0)
        merger.step(out, lse, False)
    return merger.results()[0]


def case_context_parallel_sdpa():
    mesh = init_device_mesh("npu", (WORLD,))
    q, k, v = _inputs()
    # causal attention with PyTorch's default head-tail load balancing, both kv rotations
    want_out, want_grads = _full_attention(q, k, v, is_causal=True)
    for rotation in ("allgather", "alltoall"):
        set_rotate_method(rotation)
        out, *grads = _ring_attention(mesh, q, k, v, is_causal=True)
        _close(out, want_out, 1e-6)
        for got, want in zip(grads, want_grads):
            _close(got, want, 1e-5)
    set_rotate_method("allgather")
    # without load balancing, causal and full attention: the CPU's ring merge bit for bit
    _cp_options.enable_load_balance = False
    try:
        for is_causal in (True, False):
            out, *grads = _ring_attention(mesh, q, k, v, is_causal=is_causal)
            want_out, want_grads = _full_attention(q, k, v, is_causal=is_causal)
            _close(out, want_out, 1e-6)
            for got, want in zip(grads, want_grads):
                _close(got, want, 1e-5)
            mine = out.chunk(WORLD, dim=2)[RANK].cpu()
            assert torch.equal(mine, _ring_written_out_on_cpu(q, k, v, is_causal)), "not the CPU's ring merge"
    finally:
        _cp_options.enable_load_balance = True
    # bfloat16: the merge runs in float32 (convert_to_f32), the result in bfloat16
    q, k, v = _inputs(torch.bfloat16)
    out, *grads = _ring_attention(mesh, q, k, v, is_causal=True)
    want_out, want_grads = _full_attention(q, k, v, is_causal=True)
    assert out.dtype == torch.bfloat16
    _close(out.float(), want_out.float(), 2e-2)
    for got, want in zip(grads, want_grads):
        _close(got.float(), want.float(), 5e-2)
    # the buffers are restored when the context exits
    buffers = [t.to(DEV) for t in _inputs()]
    with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
        assert buffers[0].shape[2] == SEQ // WORLD
    assert all(torch.equal(b.cpu(), t) for b, t in zip(buffers, _inputs()))


def case_context_parallel_tp_cp_mesh():
    """A 2-D (tp, cp) mesh, as torch_npu's tests build it: tensor parallel shards the heads, context parallel the
    sequence. SDPA on such DTensors runs the ring over the cp dimension's group; each rank gets its heads' attention
    of its sequence shard, and the gradients of its block of the inputs."""
    mesh = init_device_mesh("npu", (2, WORLD // 2), mesh_dim_names=("tp", "cp"))
    tp, cp = mesh.get_local_rank("tp"), mesh.get_local_rank("cp")
    placements = (Shard(1), Shard(2))

    def mine(t):  # this rank's block: its heads (tp) and its part of the sequence (cp), in order
        return t.to(DEV).chunk(2, dim=1)[tp].chunk(WORLD // 2, dim=2)[cp].contiguous()

    load_balance, _cp_options.enable_load_balance = _cp_options.enable_load_balance, False
    _enable_context_parallel_dispatcher()
    try:
        for is_causal in (False, True):
            q, k, v = _inputs()
            want_out, want_grads = _full_attention(q, k, v, is_causal)
            leaves = [mine(t).requires_grad_() for t in (q, k, v)]
            out = F.scaled_dot_product_attention(
                *(DTensor.from_local(t, mesh, placements) for t in leaves), is_causal=is_causal
            )
            out.backward(DTensor.from_local(mine(_grad_of(want_out)), mesh, placements))
            assert out.placements == placements and out.to_local().device == DEV, out
            _close(out.to_local(), mine(want_out), 1e-6)
            for leaf, want in zip(leaves, want_grads, strict=True):
                _close(leaf.grad, mine(want), 1e-5)
        by_width = [DTensor.from_local(mine(t), mesh, (Shard(3), Shard(2))) for t in _inputs()]
        _refused(
            lambda: F.scaled_dot_product_attention(*by_width),
            "scaled_dot_product_attention in context parallel needs inputs sharded on the sequence dimension "
            "(Shard(2)) by one mesh dimension and at most on batch or heads (Shard(0), Shard(1)) by the others, got "
            "(Shard(dim=3), Shard(dim=2)) on a 2-D mesh.",
        )
    finally:
        _disable_context_parallel_dispatcher()
        _cp_options.enable_load_balance = load_balance


def _refused(call, message):
    try:
        call()
    except NotImplementedError as err:
        assert str(err) == message, str(err)
    else:
        raise AssertionError(f"accepted: {message}")


def case_context_parallel_refusals():
    mesh = init_device_mesh("npu", (WORLD,))
    buffers = [t.to(DEV) for t in _inputs()]
    with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
        q, k, v = buffers
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=DEV)
        sharded = [DTensor.from_local(t, mesh, [Shard(2)]) for t in (q, k, v)]
        # SDPA with a mask or dropout does not take the fused kernel; called directly, the kernel refuses both
        sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        _refused(
            lambda: sdpa(*sharded, attn_mask=DTensor.from_local(mask.view(1, 1, *mask.shape), mesh, [Shard(2)])),
            "scaled_dot_product_attention in context parallel does not support attn_mask (use is_causal for causal "
            "attention).",
        )
        _refused(
            lambda: sdpa(*sharded, dropout_p=0.1),
            "scaled_dot_product_attention in context parallel does not support dropout (dropout_p=0.1).",
        )
        fa = torch_npu.npu_fusion_attention_v3
        _refused(
            lambda: fa(*sharded, 2, "BNSD", atten_mask=mask, sparse_mode=0),
            "npu_fusion_attention_v3 in context parallel does not support sparse_mode=0 with atten_mask (full "
            "attention is sparse_mode 0 without a mask, causal attention sparse_mode 2 or 3 with its compressed "
            "mask).",
        )
        _refused(
            lambda: fa(*sharded, 2, "BNSD", keep_prob=0.9),
            "npu_fusion_attention_v3 in context parallel does not support dropout (keep_prob=0.9).",
        )
        _refused(
            lambda: fa(*sharded, 2, "BNSD", pre_tockens=4, next_tockens=0),
            "npu_fusion_attention_v3 in context parallel does not support pre_tockens / next_tockens bands.",
        )
        _refused(
            lambda: fa(*sharded, 2, "BNSD", softmax_layout="TND"),
            "npu_fusion_attention_v3 in context parallel does not support softmax_layout='TND'.",
        )
        bsh = [DTensor.from_local(t.transpose(1, 2).flatten(2), mesh, [Shard(2)]) for t in (q, k, v)]
        _refused(
            lambda: fa(*bsh, 2, "BSH"),
            "npu_fusion_attention_v3 in context parallel does not support input_layout='BSH' (BNSD only).",
        )
        _refused(
            lambda: fa(*sharded, 2, "BNSD", actual_seq_kvlen=torch.tensor([SEQ // WORLD])),
            "npu_fusion_attention_v3 in context parallel does not support actual_seq_kvlen (values tied to global "
            "sequence positions).",
        )
        replicated = DTensor.from_local(q, mesh, [Shard(1)])
        _refused(
            lambda: fa(replicated, *sharded[1:], 2, "BNSD"),
            "npu_fusion_attention_v3 in context parallel needs inputs sharded on the sequence dimension (Shard(2)) "
            "by one mesh dimension and at most on batch or heads (Shard(0), Shard(1)) by the others, got "
            "(Shard(dim=1),) on a 1-D mesh.",
        )
    # outside the context the ring handlers are gone: SDPA on DTensors is DTensor's own business again, and
    # npu_fusion_attention_v3 has its data / tensor parallel handler back
    handlers = DTensor._op_dispatcher._custom_op_handlers
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default not in handlers
    v3 = handlers[torch.ops.npu.npu_fusion_attention_v3.default]
    assert v3.__module__ == "torch_npu.distributed.tensor._attention_sharding", v3.__module__


def _fusion_attention(q, k, v, causal):
    mask = torch.ones(2048, 2048, dtype=torch.bool, device=q.device).triu(1) if causal else None
    return torch_npu.npu_fusion_attention_v3(
        q, k, v, 2, "BNSD", atten_mask=mask, sparse_mode=3 if causal else 0, scale=0.125
    )


def case_context_parallel_fusion_attention():
    """torch_npu's operator called on sequence-sharded DTensors inside context_parallel: the ring's output,
    softmax statistics and gradients against the operator over the whole sequence."""
    mesh = init_device_mesh("npu", (WORLD,))
    q, k, v = _inputs()
    for causal in (True, False):
        _cp_options.enable_load_balance = causal
        leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
        want_out, want_max, want_sum, *_ = _fusion_attention(*leaves, causal)
        want_out.backward(_grad_of(want_out))
        (local_grad,) = _shard_like(mesh, [_grad_of(want_out)])
        buffers = [t.to(DEV) for t in (q, k, v)]
        with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
            local = [b.detach().requires_grad_() for b in buffers]
            sharded = [DTensor.from_local(t, mesh, [Shard(2)]) for t in local]
            out, smax, ssum, *_ = _fusion_attention(*sharded, causal)
            out.backward(DTensor.from_local(local_grad, mesh, [Shard(2)]))
        gathered = context_parallel_unshard(
            mesh, [out.to_local().detach(), smax.to_local(), ssum.to_local()] + [t.grad for t in local], [2] * 6
        )
        _cp_options.enable_load_balance = True
        _close(gathered[0], want_out.detach(), 1e-6)
        _close(gathered[1], want_max, 1e-6)  # each row's largest score
        _close(gathered[2], want_sum, 1e-5)
        for got, leaf in zip(gathered[3:], leaves):
            _close(got, leaf.grad, 1e-5)
    dist.barrier()
