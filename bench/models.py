"""The benchmark models, defined exactly as ../shared/anchors/torch_train_bench.py defines them,
so that hgpc and PyTorch train the same networks."""
import torch.nn as nn
import torchvision.models as tvm


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                               nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                               nn.Linear(84, 10))

    def forward(self, x):
        return self.f(x)


def make(name):
    """Returns (model, input shape without batch, classes)."""
    if name == "lenet5":
        return LeNet5(), (1, 28, 28), 10
    if name == "resnet18_cifar":
        m = tvm.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m, (3, 32, 32), 10
    if name == "googlenet":
        return tvm.googlenet(aux_logits=False, init_weights=True), (3, 224, 224), 1000
    return getattr(tvm, name)(), (3, 224, 224), 1000


# (model, batch): the CUDA backend issue's benchmark cases.
CASES = [("lenet5", 64), ("resnet18_cifar", 128), ("resnet18", 32), ("resnet18", 128),
         ("resnet50", 32), ("resnet50", 128), ("vgg16", 32), ("alexnet", 128),
         ("mobilenet_v2", 64), ("googlenet", 64)]
