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
    if name == "inception_v3":
        return tvm.inception_v3(aux_logits=False, init_weights=True), (3, 299, 299), 1000
    return getattr(tvm, name)(), (3, 224, 224), 1000


# (model, batch): the CUDA backend issue's benchmark cases.
CASES = [("lenet5", 64), ("resnet18_cifar", 128), ("resnet18", 32), ("resnet18", 128),
         ("resnet50", 32), ("resnet50", 128), ("vgg16", 32), ("alexnet", 128),
         ("mobilenet_v2", 64), ("googlenet", 64)]

# The broad suite (issue 19, `bench.py --suite broad`): torchvision CNNs beyond the ten cases,
# each at a batch that fills an H200 (the batches of the first measurements where it
# names them). Grouped and depthwise convolutions, squeeze-excitation, dense concatenation, the
# channel shuffle, inception branches and fire modules: the mechanisms, not one model's kernels.
BROAD_CASES = [("resnet34", 64), ("resnet101", 64), ("wide_resnet50_2", 64),
               ("resnext50_32x4d", 64), ("densenet121", 64), ("shufflenet_v2_x1_0", 128),
               ("regnet_y_1_6gf", 64), ("mobilenet_v3_large", 128), ("mnasnet1_0", 128),
               ("squeezenet1_1", 128), ("inception_v3", 64)]

# Models that need the modern-CNN ops (issue 23: SiLU chains, stochastic depth, LayerNorm, GELU):
# `--suite all` adds them to the broad suite.
MODERN_CASES = [("efficientnet_b0", 64), ("convnext_tiny", 64)]

SUITES = {"default": CASES, "broad": CASES + BROAD_CASES,
          "all": CASES + BROAD_CASES + MODERN_CASES}
