#!/usr/bin/python3
"""PyTorch peer of `fabench train` for throughput: the same ResNets, synthetic data, SGD with
momentum, the same thread count; warm-up steps excluded, figures as fabench computes them.

Run with Debian's python3-torch (1.13, on oneDNN 2.6):
    /usr/bin/python3 scripts/torch_train_bench.py --model resnet18 --shape 1x28x28 --batch 64 --threads 1

and against `fabench train --device cuda --precision P` on a CUDA build of PyTorch (2.x):
    python3 scripts/torch_train_bench.py --device cuda --precision P --model resnet50 \
        --shape 3x224x224 --batch 128
where P is fp32 (TF32 off), tf32 or bf16 (autocast, fp32 master weights); channels-last (NHWC, as
fabench's GPU engine) is the default on cuda.

The last line is parseable: `torch_train_bench: images_per_s=... step_ms_p50=... ...` followed by
the same figures as one JSON object on a line starting with `RESULT `.

torchvision is not needed (Debian 12 has no python3-torchvision): the models are defined here as
torchvision 0.14 defines them (ResNet v1.5: stride on the 3x3 convolution of a bottleneck), with
the first convolution taking 1 or 3 channels. resnet20/32/56 are He et al. 2016 section 4.2 with
projection shortcuts. A "-wN" suffix sets the base width, as in fabench.
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(cin, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * 4)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision.models.resnet.ResNet, with in_channels and a base width."""

    def __init__(self, block, layers, in_c, classes, width=64):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(in_c, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], 2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], 2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class CifarResNet(nn.Module):
    """He et al. 2016 section 4.2: 3x3 stem, three stages of n basic blocks (w, 2w, 4w channels),
    projection shortcuts (1x1 convolution + BN) where the shape changes."""

    def __init__(self, n, in_c, classes, width=16):
        super().__init__()
        self.inplanes = width
        self.conv1 = conv3x3(in_c, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(width, n, 1)
        self.layer2 = self._make_layer(width * 2, n, 2)
        self.layer3 = self._make_layer(width * 4, n, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 4, classes)

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes, stride), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


TORCHVISION = {18: (BasicBlock, [2, 2, 2, 2]), 34: (BasicBlock, [3, 4, 6, 3]),
               50: (Bottleneck, [3, 4, 6, 3]), 101: (Bottleneck, [3, 4, 23, 3]),
               152: (Bottleneck, [3, 8, 36, 3])}


def build(name, in_c, classes):
    base, _, w = name.partition("-w")
    if not base.startswith("resnet") or not base[6:].isdigit() or (w and not w.isdigit()):
        raise SystemExit(f"torch_train_bench: bad --model {name!r}")
    depth = int(base[6:])
    if depth in TORCHVISION:
        block, layers = TORCHVISION[depth]
        return ResNet(block, layers, in_c, classes, int(w) if w else 64)
    if depth >= 8 and (depth - 2) % 6 == 0:
        return CifarResNet((depth - 2) // 6, in_c, classes, int(w) if w else 16)
    raise SystemExit(f"torch_train_bench: unknown model {name!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--shape", default="1x28x28", help="CxHxW")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                    help="cuda only; fp32 turns TF32 off")
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                    help="NHWC model and input (default: on for cuda, off for cpu)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="cpu only")
    ap.add_argument("--steps", type=int, default=30, help="measured steps")
    ap.add_argument("--warmup-steps", type=int, default=5, help="extra steps, not measured")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=0)
    a = ap.parse_args()
    try:
        c, h, w = (int(v) for v in a.shape.split("x"))
    except ValueError:
        raise SystemExit(f"torch_train_bench: bad --shape {a.shape!r} (CxHxW)")
    if a.batch < 1 or a.threads < 1 or a.steps < 1 or a.warmup_steps < 0:
        raise SystemExit("torch_train_bench: --batch, --threads, --steps must be >= 1")
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        why = "no GPU is visible" if torch.version.cuda else "it is built without CUDA"
        raise SystemExit(f"torch_train_bench: --device cuda, but torch {torch.__version__}: {why}")
    if not cuda and a.precision != "fp32":
        raise SystemExit(f"torch_train_bench: --precision {a.precision} needs --device cuda")
    channels_last = cuda if a.channels_last is None else a.channels_last
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    if cuda:
        # explicit, as the defaults differ by version; bf16 keeps its remaining fp32 ops strict
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
        # the peer's best setting: cuDNN times its algorithms (in warm-up), as fabench --cudnn-search
        torch.backends.cudnn.benchmark = True
    else:
        torch.set_num_threads(a.threads)
        torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    model = build(a.model, c, a.classes).train().to(a.device, memory_format=fmt)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd,
                          nesterov=a.nesterov)
    # synthetic data made once, as tf_cnn_benchmarks and Horovod's synthetic benchmark do
    x = torch.randn(a.batch, c, h, w, device=a.device).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=a.device)
    # bf16 mixed precision: the weights and the optimizer stay fp32, bf16 needs no loss scaling
    autocast = contextlib.nullcontext
    if a.precision == "bf16":
        autocast = lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    # kernels run asynchronously: wait for them at each step boundary so the clock sees them
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    times, loss = [], math.nan
    for step in range(a.warmup_steps + a.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast():
            out = model(x)
            l = F.cross_entropy(out, y)
        l.backward()
        opt.step()
        loss = l.item()
        sync()
        dt = time.perf_counter() - t0
        if step >= a.warmup_steps:
            times.append(dt)
        if a.log_every and (step + 1) % a.log_every == 0:
            print(f"step {step + 1} loss {loss:.4f} {a.batch / dt:.1f} img/s", flush=True)

    res = {
        "model": a.model, "input": a.shape, "classes": a.classes, "batch": a.batch,
        "device": a.device, "precision": a.precision, "channels_last": channels_last,
        "threads": a.threads, "params": params, "measured_steps": len(times),
        "warmup_steps": a.warmup_steps,
        "images_per_s": a.batch * len(times) / sum(times),
        "step_ms_mean": 1e3 * statistics.mean(times),
        "step_ms_p50": 1e3 * statistics.median(times),
        "final_loss": loss, "torch": torch.__version__,
        "mkldnn": torch.backends.mkldnn.is_available(),
    }
    if cuda:  # no spaces: the first line is key=value pairs split on spaces
        res.update(gpu=torch.cuda.get_device_name().replace(" ", "_"), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    print("torch_train_bench: " + " ".join(f"{k}={v}" for k, v in res.items()))
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.exit(main())
