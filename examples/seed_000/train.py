# context: the `train.py` that 4.2's msprof lines profile: a small CNN trained for a few steps on npu
# (nothing in it knows about profiling)
import torch
import torch_npu

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 10)).npu()
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
data = [(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))) for _ in range(2)]
for step, (images, labels) in enumerate(data * 4):
    images, labels = images.npu(), labels.npu()
    logits = model(images)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    majority = logits.argmax(dim=1).mode().values  # the most predicted class, for the log
    print(f"step={step} loss={loss.item():.4f} majority_class={int(majority)}")
