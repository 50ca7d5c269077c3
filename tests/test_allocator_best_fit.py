"""The caching allocator's small pool hands out the smallest free block that fits, wherever the free sizes lie
among its 4,097 size classes (a few bit scans over the class bitmap and its summary, never a walk)."""

import gc

import torch

KiB = 1024
PAD = 32  # torch_npu pads every request by 32 bytes before rounding to 512


def block(nbytes, device):
    return torch.empty(nbytes - PAD, dtype=torch.uint8, device=device)


def test_the_smallest_fitting_free_block_is_taken_across_size_classes(fresh_allocator):
    dev = "npu:5"
    assert torch.npu.memory_reserved(dev) == 0
    # One 2 MiB small-pool segment carved into holes of 1 KiB, 64 KiB and 512 KiB kept apart by live guards;
    # the segment's tail (about 1.4 MiB) stays free: the free sizes sit in distant words of the class bitmap.
    a = block(1 * KiB, dev)
    guards = [block(512, dev)]
    b = block(64 * KiB, dev)
    guards.append(block(512, dev))
    c = block(512 * KiB, dev)
    guards.append(block(512, dev))
    base, hole_b, hole_c = a.data_ptr(), b.data_ptr(), c.data_ptr()
    tail = guards[-1].data_ptr() + 512
    del a, b, c
    gc.collect()

    x = block(2 * KiB, dev)  # 1 KiB is too small: the 64 KiB hole, not the tail
    assert x.data_ptr() == hole_b
    y = block(100 * KiB, dev)  # the 62 KiB left of that hole is too small: the 512 KiB hole
    assert y.data_ptr() == hole_c
    z = block(700 * KiB, dev)  # only the tail fits
    assert z.data_ptr() == tail
    w = block(512, dev)  # the smallest free block of all: the 1 KiB hole
    assert w.data_ptr() == base
    assert torch.npu.memory_stats(dev)["segment.all.current"] == 1

    del x, y, z, w, guards
    gc.collect()
    # Everything merged back into one free 2 MiB block (the last word of the bitmap): a 1 MiB request starts it.
    whole = block(1024 * KiB, dev)
    assert whole.data_ptr() == base
    assert torch.npu.memory_stats(dev)["segment.all.current"] == 1
