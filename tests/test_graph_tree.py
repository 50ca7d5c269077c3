"""NPU graph trees (torch_npu.npu._graph_tree): functions warmed up, recorded and replayed as PyTorch's CUDA
graph trees do, branches recorded from pool checkpoints, and the allocator functions they stand on."""

import inspect

import pytest
import torch
from torch._inductor import config

import torch_npu
from torch_npu.npu import _graph_tree as gt

KWARGS = dict(device_index=0, is_backward=False, is_inference=True, stack_traces=[None])


@pytest.fixture(autouse=True)
def fresh_trees():
    gt.reset_npugraph_trees()
    with config.patch({"triton.slow_path_cudagraph_asserts": True, "triton.fast_path_cudagraph_asserts": True}):
        yield
    gt.reset_npugraph_trees()


def boxed(fn):
    """A function in the graph trees' calling convention (a list of inputs it empties, a list of outputs)."""

    def model(inputs):
        args = list(inputs)
        inputs.clear()
        return [fn(*args)]

    return model


def linear(x, w):
    return torch.relu(x @ w)


def test_a_function_is_warmed_up_then_recorded_then_replayed_with_the_cpus_results():
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    run = gt.npugraphify_impl(boxed(linear), [x.npu(), w.npu()], (1,), **KWARGS)
    w_npu = w.npu()
    pointers, states = [], []
    for step in range(4):
        gt.mark_step_begin()
        xi = x * (step + 1)
        out = run([xi.npu(), w_npu])[0]
        assert torch.equal(out.cpu(), linear(xi, w))
        pointers.append(out.data_ptr())
        states.append(gt.get_container(0).tree_manager.path_state)
    E = gt.ExecutionState
    assert states == [E.WARMUP, E.RECORDING, E.EXECUTION, E.EXECUTION]
    assert pointers[1] == pointers[2] == pointers[3]  # replays write the recorded output's memory
    assert gt.get_container(0).tree_manager.new_graph_id().id == 1  # one graph was recorded


def test_an_output_of_an_earlier_step_raises_instead_of_reading_memory_a_replay_overwrote():
    w = torch.randn(8, 3).npu()
    run = gt.npugraphify_impl(boxed(linear), [torch.randn(4, 8).npu(), w], (1,), **KWARGS)
    outputs, inputs = [], []
    for _ in range(4):
        gt.mark_step_begin()
        inputs.append(torch.randn(4, 8))
        outputs.append(run([inputs[-1].npu(), w])[0])
    for stale in outputs[:2]:  # the warm-up's and the recording's outputs: their memory is the replays' now
        with pytest.raises(RuntimeError) as info:
            stale.sum()
        assert str(info.value).startswith(
            "Error: accessing tensor output of NPUGraphs that has been overwritten by a subsequent run."
        )
        assert "torch.compiler.npugraph_mark_step_begin() before each model invocation" in str(info.value)
    # the replays return one tensor over the graph's output memory, holding the latest replay's result
    assert outputs[2] is outputs[3]
    assert torch.equal(outputs[3].cpu(), linear(inputs[3], w.cpu()))


def test_a_second_branch_is_recorded_from_the_pool_checkpoint_of_the_replayed_path():
    # step by step: g1 then g2 or g3 on g1's live output. Recording g3 after replaying g1 restores the pool to
    # g1's checkpoint with g1's output alive (the slow-path asserts check the pool against the live tensors).
    def double(a):
        return a * 2 + 1

    def wave(a):
        return a.sin() - a

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    w_npu = w.npu()
    g1 = gt.npugraphify_impl(boxed(linear), [x.npu(), w_npu], (1,), **KWARGS)
    g2 = gt.npugraphify_impl(boxed(double), [x.npu()], (), **KWARGS)
    g3 = gt.npugraphify_impl(boxed(wave), [x.npu()], (), **KWARGS)
    for step in range(8):
        gt.mark_step_begin()
        xi = x + step
        a = g1([xi.npu(), w_npu])[0]
        second, reference = (g2, double) if step % 2 == 0 else (g3, wave)
        b = second([a])[0]
        assert torch.equal(a.cpu(), linear(xi, w))
        assert torch.equal(b.cpu(), reference(linear(xi, w)))
    manager = gt.get_container(0).tree_manager
    assert manager.new_graph_id().id == 3  # g1, and g2 and g3 as its children
    assert manager.debug_checkpointing_counter >= 1


def test_the_module_has_torch_npus_names_and_signatures():
    assert list(inspect.signature(gt.NPUGraphNode).parameters) == [
        "wrapped_function", "graph_id", "parent", "inputs", "npu_graphs_pool", "device_index", "stack_traces",
        "stream", "mode", "compile_id",
    ]  # fmt: skip
    assert "existing_npu_graph" in inspect.signature(gt.NPUWarmupNode).parameters
    assert gt.TreeManagerContainer(0).live_npugraphify_fns == 0
    for name in ("npugraphify", "get_npugraph_segments", "reset_npugraph_trees", "NPUGraphTreeManager"):
        assert callable(getattr(gt, name))


def test_assertions_raise_runtime_errors_and_messages_keep_inductors_option_names():
    with pytest.raises(RuntimeError, match="^check isinstance\\(index, tuple\\) fail$"):
        gt.AliasesPriorGraphOutput("not a tuple")
    with pytest.raises(RuntimeError) as info:
        gt.check_memory_pool(0, (0, 0), [1])
    assert str(info.value).startswith("check all(isinstance(elem, StorageWeakRefWrapper)")


def test_npugraph_mark_step_begin_is_torch_compilers():
    from torch_npu.utils import _graph_tree

    assert torch.compiler.npugraph_mark_step_begin is _graph_tree.npugraph_mark_step_begin
    before = gt.MarkStepBox.mark_step_counter
    torch.compiler.npugraph_mark_step_begin()
    assert gt.MarkStepBox.mark_step_counter == before - 1


def test_a_capture_returns_the_memory_only_the_graph_uses_to_its_pool():
    x, w = torch.randn(4, 8, device="npu"), torch.randn(8, 3, device="npu")
    pool = torch.npu.graph_pool_handle()
    graph = torch.npu.NPUGraph()
    torch.npu.synchronize()
    before = torch.npu.memory_allocated()
    with torch.npu.graph(graph, pool=pool):
        h = torch.relu(x.clone() @ w)
        y = h + 1
        del h
    # the clone, the product and the relu were the graph's intermediates: only y is allocated in the pool
    allocated = [address for address, state in pool_blocks(pool).items() if state == "active_allocated"]
    assert allocated == [y.data_ptr()]
    assert torch.npu.memory_allocated() - before == 512  # y's block
    x.mul_(2)
    graph.replay()
    assert torch.equal(y.cpu(), torch.relu(x.cpu() @ w.cpu()) + 1)


def pool_blocks(pool):
    return {
        b["address"]: b["state"]
        for seg in torch.npu.memory_snapshot()
        if tuple(seg["segment_pool_id"]) == tuple(pool)
        for b in seg["blocks"]
    }


def test_a_pool_checkpoint_restores_which_blocks_are_allocated_and_hands_live_storages_their_deleter():
    pool = torch.npu.graph_pool_handle()
    torch_npu.npu.graphs._begin_allocate_to_pool(0, pool)
    try:
        a, b = torch.empty(64, device="npu"), torch.empty(64, device="npu")
    finally:
        torch_npu.npu.graphs._end_allocate_to_pool(0, pool)
    a_ptr, b_ptr, nbytes = a.data_ptr(), b.data_ptr(), a.untyped_storage().nbytes()
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, {a_ptr, b_ptr})
    state = torch_npu._C._npu_getCheckpointState(0, pool)
    blocks = pool_blocks(pool)
    del a, b
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, set())
    # restored: both blocks allocated again, owned by nobody
    torch_npu._C._npu_setCheckpointPoolState(0, state, [], [])
    assert pool_blocks(pool) == blocks
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, {a_ptr, b_ptr})
    # a storage built over a's memory without a deleter is live: restoring gives it the pool's deleter
    storage = torch._C._construct_storage_from_data_pointer(a_ptr, torch.device("npu:0"), nbytes)
    assert not torch_npu._C._has_Standard_Deleter(storage._cdata)
    torch_npu._C._npu_setCheckpointPoolState(0, state, [], [storage._cdata])
    assert torch_npu._C._has_Standard_Deleter(storage._cdata)
    torch_npu._C._npu_npuCachingAllocator_raw_delete(b_ptr)  # b is dead: the graph tree frees its block
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, {a_ptr})
    del storage
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, set())
    torch_npu.npu.graphs._release_pool(0, pool)


def test_raw_delete_of_memory_that_is_no_block_is_refused():
    with pytest.raises(RuntimeError) as info:
        torch_npu._C._npu_npuCachingAllocator_raw_delete(12345)
    assert str(info.value).splitlines()[0] == (
        "invalid device pointer: 0x3039 is not an allocated block of an npu memory pool"
    )


def test_a_storage_taken_from_its_tensor_raises_its_message_on_use():
    t = torch.ones(4, device="npu")
    torch_npu._C._set_storage_access_error_msg(t, "this output was overwritten")
    with pytest.raises(RuntimeError, match="this output was overwritten"):
        t + 1


def pool_with_one_block():
    pool = torch.npu.graph_pool_handle()
    torch_npu.npu.graphs._begin_allocate_to_pool(0, pool)
    try:
        block = torch.empty(64, device="npu")
    finally:
        torch_npu.npu.graphs._end_allocate_to_pool(0, pool)
    return pool, block


def first_line(info):
    return str(info.value).splitlines()[0]


def test_a_checkpoint_is_refused_on_another_device_and_with_a_live_storage_that_has_a_deleter():
    pool, block = pool_with_one_block()
    state = torch_npu._C._npu_getCheckpointState(0, pool)
    with pytest.raises(RuntimeError) as info:
        torch_npu._C._npu_setCheckpointPoolState(1, state, [], [])
    assert first_line(info) == "the checkpoint belongs to another npu device"
    with pytest.raises(RuntimeError) as info:
        torch_npu._C._npu_setCheckpointPoolState(0, state, [], [block.untyped_storage()._cdata])
    assert first_line(info) == "a live storage of the npu graph tree already has a deleter"
    # refused before the pool changed: the block is still the tensor's, and freeing it works
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, {block.data_ptr()})
    del block
    assert torch_npu._C._npu_checkPoolLiveAllocations(0, pool, set())
    torch_npu.npu.graphs._release_pool(0, pool)


def test_a_checkpoint_of_a_released_pool_is_refused():
    pool, block = pool_with_one_block()
    state = torch_npu._C._npu_getCheckpointState(0, pool)
    del block
    torch_npu.npu.graphs._release_pool(0, pool)  # the last hold: its free segments go back to the host
    with pytest.raises(RuntimeError) as info:
        torch_npu._C._npu_setCheckpointPoolState(0, state, [], [])
    assert first_line(info) == "a checkpointed segment of the npu memory pool no longer exists"


def test_freeing_a_storage_without_the_pools_deleter_is_refused():
    t = torch.ones(4, device="npu")
    storage = torch._C._construct_storage_from_data_pointer(t.data_ptr(), torch.device("npu:0"), 16)
    with pytest.raises(RuntimeError) as info:
        torch_npu._C._free_And_Remove_DeleterFn(storage._cdata)
    assert first_line(info) == "Expected the standard deleter of npu memory"
    assert torch.equal(t.cpu(), torch.ones(4))  # t's memory was not freed


def test_ending_a_redirection_to_a_pool_that_was_not_begun_is_refused():
    with pytest.raises(RuntimeError) as info:
        torch_npu.npu.graphs._end_allocate_to_pool(0, (0, 12345))
    assert str(info.value) == "endAllocateToPool: this thread is not allocating to pool (0, 12345) on npu:0"
