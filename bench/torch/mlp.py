# SPDX-License-Identifier: Apache-2.0
"""The MLP both torch benchmarks train (bench_torch.py, bench_hooks.py): @depth hidden
Linear+ReLU layers of @width between @inputs and @outputs."""


def mlp(inputs, width, depth, outputs):
    import torch.nn as nn
    layers, last = [], inputs
    for _ in range(depth):
        layers += [nn.Linear(last, width), nn.ReLU()]
        last = width
    layers.append(nn.Linear(last, outputs))
    return nn.Sequential(*layers)
