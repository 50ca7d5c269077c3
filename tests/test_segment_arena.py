"""npu segments live in one memfd per process (the segment arena), so the ranks of one host can map each other's
npu memory: freed segments give their pages back to the host, and a forked child never frees its parent's."""

from subprocess_helpers import run_python

ARENA_BYTES = """
    import os
    def arena_bytes():
        for fd in os.listdir("/proc/self/fd"):
            try:
                if "vnpu-npu-memory" in os.readlink(f"/proc/self/fd/{fd}"):
                    return os.fstat(int(fd)).st_blocks * 512 >> 20
            except OSError:
                pass
        return None
"""


def test_freed_segments_give_their_pages_back_to_the_host():
    proc = run_python(
        ARENA_BYTES
        + """
    import torch, torch_npu
    x = torch.full((16 * 2**20,), 3.0, device="npu")   # 64 MiB, a segment of its own
    y = torch.full((8 * 2**20,), 5.0, device="npu")
    print(arena_bytes())
    del y
    print(arena_bytes())                               # cached by the allocator: still held
    torch.npu.empty_cache()
    print(arena_bytes(), x.sum().item())
    """
    )
    assert proc.stdout.split() == ["96", "96", "64", str(3.0 * 16 * 2**20)]


def test_a_forked_child_never_frees_its_parents_npu_memory():
    proc = run_python(
        ARENA_BYTES
        + """
    import torch, torch_npu
    x = torch.full((16 * 2**20,), 3.0, device="npu")
    y = torch.full((16 * 2**20,), 5.0, device="npu")
    del y                                              # a cached segment the child's empty_cache would release
    pid = os.fork()
    if pid == 0:
        torch.npu.empty_cache()
        os._exit(0)
    os.waitpid(pid, 0)
    print(arena_bytes())
    torch.npu.empty_cache()
    print(arena_bytes(), x.sum().item())
    """
    )
    assert proc.stdout.split() == ["128", "64", str(3.0 * 16 * 2**20)]


def test_planning_mode_reserves_no_memory_in_the_arena():
    proc = run_python(
        ARENA_BYTES
        + """
    import torch, torch_npu
    x = torch.empty(16 * 2**20, device="npu")
    print(torch.npu.memory_reserved() >= 2**26, arena_bytes())
    """,
        env={"VNPU_PLAN": "1"},
    )
    assert proc.stdout.split() == ["True", "None"]
