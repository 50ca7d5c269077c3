"""The NSA inference operators over paged caches equal the training operators run on the caches' logical rows:
npu_nsa_select_attention_infer (BSND queries, pages scattered through block_table) and
npu_nsa_compress_attention_infer (TND queries)."""

import torch

import torch_npu

PAGE = 4


def paged(rows_per_batch, heads, dim, g):
    """(cache [blocks, PAGE, heads * dim], block_table, logical rows per batch) with the pages shuffled."""
    batches = [torch.randn(n, heads, dim, generator=g).to(torch.float16) for n in rows_per_batch]
    per = [(n + PAGE - 1) // PAGE for n in rows_per_batch]
    order = torch.randperm(sum(per), generator=g)
    cache = torch.zeros(sum(per), PAGE, heads * dim, dtype=torch.float16)
    table = torch.zeros(len(batches), max(per), dtype=torch.int32)
    page = 0
    for b, rows in enumerate(batches):
        for p in range(per[b]):
            block = int(order[page])
            chunk = rows[p * PAGE : (p + 1) * PAGE].reshape(-1, heads * dim)
            cache[block, : chunk.shape[0]] = chunk
            table[b, p] = block
            page += 1
    return cache, table, batches


def test_select_infer_reads_the_paged_cache():
    g = torch.Generator().manual_seed(0)
    kvlen = [8, 12]
    kcache, table, keys = paged(kvlen, 2, 8, g)
    g2 = torch.Generator().manual_seed(1)
    vcache, _, values = paged(kvlen, 2, 6, g2)
    # the value pages must sit where the key pages are: rebuild them with the key table's order
    vcache = torch.zeros(kcache.shape[0], PAGE, 12, dtype=torch.float16)
    for b, rows in enumerate(values):
        for p in range((kvlen[b] + PAGE - 1) // PAGE):
            chunk = rows[p * PAGE : (p + 1) * PAGE].reshape(-1, 12)
            vcache[table[b, p], : chunk.shape[0]] = chunk
    q = torch.randn(2, 1, 4, 8, generator=g).to(torch.float16)
    topk = torch.tensor([[[[0, 1], [1, 0]]], [[[2, 0], [1, 2]]]], dtype=torch.int32)
    out = torch_npu.npu_nsa_select_attention_infer(
        q.npu(), kcache.npu(), vcache.npu(), topk.npu(), 0.4, 4, 2, 4, 2, PAGE, layout="BSND", block_table=table.npu(),
        actual_seq_kvlen=kvlen,
    )  # fmt: skip
    want, _, _ = torch_npu.npu_nsa_select_attention(
        q.reshape(2, 4, 8).npu(), torch.cat(keys).npu(), torch.cat(values).npu(), topk.reshape(2, 2, 2).npu(), 0.4, 4,
        4, 2, actual_seq_qlen=[1, 2], actual_seq_kvlen=[8, 20],
    )  # fmt: skip
    assert out.shape == (2, 1, 4, 6)
    assert torch.equal(out.cpu().reshape(2, 4, 6), want.cpu())

    def step(q, k, v, topk, table):
        return torch_npu.npu_nsa_select_attention_infer(q, k, v, topk, 0.4, 4, 2, 4, 2, PAGE, layout="BSND",
                                                        block_table=table, actual_seq_kvlen=kvlen)  # fmt: skip

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(q.npu(), kcache.npu(), vcache.npu(), topk.npu(), table.npu()).cpu(), out.cpu())


def test_compress_infer_reads_the_paged_cache():
    g = torch.Generator().manual_seed(2)
    kvlen = [9, 7]
    kcache, table, keys = paged(kvlen, 1, 8, g)
    vcache = kcache[..., :6].contiguous()  # values: the first 6 dims of each key row, same pages
    values = [k[..., :6] for k in keys]
    q = torch.randn(5, 2, 8, generator=g).to(torch.float16)
    out, topk = torch_npu.npu_nsa_compress_attention_infer(
        q.npu(), kcache.npu(), vcache.npu(), 0.3, 2, 1, 32, 2, PAGE, 32, 16, layout="TND", block_table=table.npu(),
        actual_seq_qlen=[3, 5], actual_cmp_seq_kvlen=kvlen, actual_sel_seq_kvlen=[4, 3],
    )  # fmt: skip
    want_out, want_topk, _, _ = torch_npu.npu_nsa_compress_attention(
        q.npu(), torch.cat(keys).npu(), torch.cat(values).npu(), 0.3, 2, 32, 16, 32, 2, actual_seq_qlen=[3, 5],
        actual_cmp_seq_kvlen=[9, 16], actual_sel_seq_kvlen=[4, 7],
    )  # fmt: skip
    assert torch.equal(out.cpu(), want_out.cpu()) and torch.equal(topk.cpu(), want_topk.cpu())
