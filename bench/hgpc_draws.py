"""hgpc's data order and augmentation draws, replayed in Python (runtime/runner/BatchLoader.cpp,
ImageTransform.cpp), so that PyTorch can train on exactly the batches an hgpc run trains on.

A convergence gap between hgpc and PyTorch has two possible sources: the random draws (the
order of the samples, the crops, the flips) or the arithmetic. Feeding PyTorch hgpc's own
batches removes the first: tests/integration/test_images.py (ReplayTest) uses this to show
that hgpc on the CPU trains step for step as PyTorch does, and `bench/images.py converge
--replay` does the same on the GPU over whole epochs.

    order = epoch_order(n, seed, epoch)        # the sample indices of one epoch, in order
    x = cifar_sample(image, seed, epoch, i)    # --augment cifar's RandomCrop(padding) + flip

Only the imagefolder/idx/CIFAR paths without tar shards are replayed (shards reorder by shard).
"""
import math

import numpy as np

_M = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _splitmix(state):
    s = [state & _M]

    def nxt():
        s[0] = (s[0] + _GOLDEN) & _M
        z = s[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
        return z ^ (z >> 31)
    return nxt


def epoch_order(n, seed, epoch):
    """BatchLoader.cpp's epochOrder: a Fisher-Yates shuffle of range(n) keyed by (seed, epoch)."""
    nxt = _splitmix(((seed * _GOLDEN) & _M) ^ ((epoch + 0x632BE59BD9B4E019) & _M))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        limit = _M - _M % bound
        r = nxt()
        while r >= limit:
            r = nxt()
        j = r % bound
        order[i], order[j] = order[j], order[i]
    return order


def sample_rng(seed, epoch, index):
    """ImageTransform.cpp's SampleRng: uniform doubles in [0, 1) keyed by (seed, epoch, index)."""
    s = (seed * _GOLDEN) & _M
    s ^= ((epoch + 0x632BE59BD9B4E019) * 0xBF58476D1CE4E5B9) & _M
    s ^= ((index + 0x2545F4914F6CDD1D) * 0x94D049BB133111EB) & _M
    nxt = _splitmix(s)
    return lambda: (nxt() >> 11) * 2.0 ** -53


def integer(u, lo, hi):
    """torch.randint(lo, hi) from one uniform draw, as the runner takes it."""
    return lo + min(hi - lo - 1, math.floor(u() * (hi - lo)))


def cifar_sample(img, seed, epoch, index, padding=4, flip=0.5):
    """--augment cifar on one H x W (x C) uint8 image: RandomCrop(size, padding) with zero
    padding, then RandomHorizontalFlip(flip), drawing as the runner does (row offset, column
    offset, then the flip)."""
    u = sample_rng(seed, epoch, index)
    h, w = img.shape[:2]
    i, j = integer(u, 0, 2 * padding + 1), integer(u, 0, 2 * padding + 1)
    pad = np.zeros((h + 2 * padding, w + 2 * padding) + img.shape[2:], np.uint8)
    pad[padding:padding + h, padding:padding + w] = img
    out = pad[i:i + h, j:j + w]
    if flip > 0 and u() < flip:
        out = out[:, ::-1]
    return np.ascontiguousarray(out)
