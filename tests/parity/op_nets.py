"""Small trainable networks for parity.py, each built around ops that no torchvision model
exports on Debian's torch 1.13, so that their forward and backward are judged against PyTorch
like the zoo's."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SelectNet(nn.Module):
    """Issue 23's selection ops: torch.where on a comparison, torch.maximum and torch.minimum (one
    operand broadcast from a parameter) and amax; they export as Greater, Where, Max, Min and
    ReduceMax."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(3, 8, 3, padding=1)
        self.floor = nn.Parameter(torch.linspace(-0.2, 0.2, 8).reshape(8, 1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        m = torch.maximum(a, self.floor)
        y = torch.where(a > b, m, torch.minimum(b, 0.5 * a))
        return self.fc(torch.cat([y.amax(dim=(2, 3)), torch.amax(b, dim=3).mean(dim=2)], 1))


class GatherNet(nn.Module):
    """Gather of computed tensors by constant indices, as torch's dynamo exporter writes
    as_strided: a permutation of a flattened activation (to channels-last, scaled per channel
    after it, so that the permutation's backward matters), an index_select of every other
    channel, and a select of one channel. hgpc imports them as Reshape + Transpose, a Slice of step
    2, and a Slice + Reshape (frontends/onnx/importers/MiscImporters.cpp, gatherAsView)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(3, 8, 3, padding=1)
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 8))
        self.register_buffer("perm", torch.arange(8 * 64).reshape(8, 8, 8).permute(1, 2, 0).contiguous())
        self.register_buffer("odd", torch.tensor([1, 3, 5, 7]))
        self.fc = nn.Linear(8 + 4 + 8, 10)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        cl = a.reshape(a.shape[0], -1)[:, self.perm] * self.w  # [N, 8, 8, 8], channels last
        odd = torch.index_select(b, 1, self.odd)  # [N, 4, 8, 8]
        two = b.select(1, 2)  # [N, 8, 8]
        return self.fc(torch.cat([F.relu(cl).mean(dim=(1, 2)), odd.mean(dim=(2, 3)),
                                  two.amax(dim=2)], 1))
