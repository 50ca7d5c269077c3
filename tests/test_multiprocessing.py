"""torch.multiprocessing with npu tensors: a tensor put on a queue shares its storage with the receiver
(writes on either side are seen by the other), as torch_npu's IPC handles make it on the card."""

import sys

from subprocess_helpers import run

PROGRAM = """
import torch, torch_npu
import torch.multiprocessing as mp


def child(inbox, outbox):
    view, same_storage, weight, event, host = inbox.get(timeout=60)
    outbox.put((str(view.device), view.tolist(), view.untyped_storage().data_ptr() == same_storage.untyped_storage().data_ptr(),
                type(weight).__name__, weight.requires_grad, event.query()))
    view.mul_(10)  # the parent sees this
    host.add_(5)  # CPU tensors keep torch's sharing
    outbox.put("written")
    assert inbox.get(timeout=60) == "your turn"
    outbox.put(same_storage.tolist())  # and this process sees the parent's write
    outbox.put(view)  # sent on from here: the same memory again, not a copy
    assert inbox.get(timeout=60) == "done"


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=child, args=(inbox, outbox))
    worker.start()
    try:
        base = torch.arange(8.0, device="npu:1")
        weight = torch.nn.Parameter(torch.ones(3, device="npu:1"))
        event = torch.npu.Event(interprocess=True)
        event.record()
        host = torch.zeros(3)
        inbox.put((base[2:5], base, weight, event, host))
        device, values, shared, kind, requires_grad, done = outbox.get(timeout=60)
        assert (device, values, shared, kind, requires_grad, done) == ("npu:1", [2.0, 3.0, 4.0], True, "Parameter", True, True)
        assert outbox.get(timeout=60) == "written"
        assert base.tolist() == [0.0, 1.0, 20.0, 30.0, 40.0, 5.0, 6.0, 7.0], base
        assert host.tolist() == [5.0, 5.0, 5.0], host
        base[0] = -1
        inbox.put("your turn")
        assert outbox.get(timeout=60) == [-1.0, 1.0, 20.0, 30.0, 40.0, 5.0, 6.0, 7.0]
        echoed = outbox.get(timeout=60)
        base[3] = 99
        assert echoed.device == base.device and echoed.tolist() == [20.0, 99.0, 40.0], echoed
        inbox.put("done")
        worker.join(60)
        assert worker.exitcode == 0, worker.exitcode
    finally:
        if worker.is_alive():
            worker.kill()

    from multiprocessing.reduction import ForkingPickler

    from torch_npu.multiprocessing.reductions import _new_shared_npu

    def refused(error, text, call):
        try:
            call()
        except error as e:
            assert str(e).startswith(text), e
            return str(e)
        raise AssertionError(text)

    refused(RuntimeError, "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not "
            "support crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).",
            lambda: ForkingPickler.dumps(torch.ones(2, device="npu", requires_grad=True) * 2))
    refused(RuntimeError, "Cannot pickle NPU storage; try pickling a NPU tensor instead",
            lambda: ForkingPickler.dumps(torch.ones(2, device="npu").untyped_storage()))
    refused(ValueError, "_new_shared_npu: a shared npu storage starts its shared memory, got offset 4",
            lambda: _new_shared_npu(0, None, 8, 4))
    message = refused(RuntimeError, "share_npu_storage expects an npu tensor, got cpu",
                      lambda: torch_npu._C._share_npu_storage(torch.ones(2)))
    assert "ERR00001 PTA invalid parameter" in message, message
    message = refused(RuntimeError, "open_shared_npu_storage: invalid segment (fd -1, 8 bytes)",
                      lambda: torch_npu._C._open_shared_npu_storage(-1, 8, 0))
    assert "ERR00001 PTA invalid parameter" in message, message
    import os
    read_only = os.open(os.devnull, os.O_RDONLY)  # a descriptor that cannot be mapped for writing
    message = refused(RuntimeError, "sharing npu memory between processes: mmap of 8 bytes failed: ",
                      lambda: torch_npu._C._open_shared_npu_storage(read_only, 8, 0))
    assert "ERR00010 PTA system call failed" in message, message
    torch.multiprocessing.set_sharing_strategy("file_system")  # CPU storages shared by file name, as torch does
    t = torch.arange(3.0)
    u = ForkingPickler.loads(ForkingPickler.dumps(t))
    u.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0], t
    print("ok")
"""


def test_npu_tensors_on_a_queue_share_their_memory_with_the_other_process(tmp_path):
    script = tmp_path / "share.py"
    script.write_text(PROGRAM)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("VNPU_", "ASCEND_RT_"))}
    proc = run([sys.executable, str(script)], dict(env, VNPU_OPS_PROFILE="none"), timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr[-3000:]
