# context: the article leaves the dataset to the reader
import torch
from torch.utils.data import DataLoader, Dataset
import torch_npu


class MyDataset(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.full((8,), float(i)), i % 4


# 常规数据加载
dataset = MyDataset()
dataloader = DataLoader(dataset, batch_size=32)

# 优化后的NPU数据加载
dataloader = DataLoader(dataset, batch_size=32,
                       num_workers=4,
                       pin_memory=True,
                       prefetch_factor=2)

# context: consume the loader on npu
total = 0.0
for x, y in dataloader:
    total += float(x.npu(non_blocking=True).sum())
print(total)
