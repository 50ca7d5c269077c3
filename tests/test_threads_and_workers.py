"""npu from other threads and alongside forked DataLoader workers."""

import threading

import torch


def grads(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(device)
    x = torch.randn(4, 8).to(device)
    model(x).sum().backward()
    return [p.grad.cpu() for p in model.parameters()]


def test_backward_on_another_thread_uses_the_autograd_device_threads():
    # Only the importing thread runs npu backward inline; elsewhere PyTorch's device threads do.
    result = {}
    thread = threading.Thread(target=lambda: result.update(g=grads("npu:1")))
    thread.start()
    thread.join()
    expected = grads("cpu")
    assert all(torch.equal(a, b) for a, b in zip(result["g"], expected))


def test_concurrent_threads_compute_independently():
    outputs = {}

    def work(i):
        torch.npu.set_device(i)
        a = torch.full((256, 256), float(i + 1), device="npu")
        for _ in range(20):
            a = (a @ torch.eye(256, device="npu")) + 0
        outputs[i] = (a.device.index, a[0, 0].item())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == {i: (i, float(i + 1)) for i in range(4)}


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([float(i * i)])


def test_dataloader_workers_next_to_an_initialised_npu():
    on_npu = torch.ones(2, device="npu")  # the device is initialised in the parent
    loader = torch.utils.data.DataLoader(Squares(), batch_size=4, num_workers=2, pin_memory=True)
    batches = [b.to("npu", non_blocking=True) for b in loader]
    total = sum(b.sum() for b in batches) + on_npu.sum()
    assert total.item() == sum(i * i for i in range(8)) + 2
