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
        worker.join(60)
        assert worker.exitcode == 0, worker.exitcode
    finally:
        if worker.is_alive():
            worker.kill()

    from multiprocessing.reduction import ForkingPickler
    for value, text in ((torch.ones(2, device="npu", requires_grad=True) * 2, "Cowardly refusing to serialize non-leaf"),
                        (torch.ones(2, device="npu").untyped_storage(), "Cannot pickle NPU storage")):
        try:
            ForkingPickler.dumps(value)
            raise AssertionError(text)
        except RuntimeError as e:
            assert text in str(e), e
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
