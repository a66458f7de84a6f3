#!/usr/bin/python3
"""Writes the PyTorch fixtures that tests/models/test_nn_torch.c compares the C ResNets against.

For each small ResNet: the weights, one batch, the logits, the mean cross-entropy loss, every
gradient, the BN running statistics after that step, and a 10-step SGD loss trajectory. PyTorch
computes in float64, so the fixture is a reference for the C code's float32, not a peer of it.

The tolerances are in the fixture too: 1e-4 relative, or 4x PyTorch's own float32 error against
its float64 where the network is worse conditioned than that (narrow deep nets with batch
normalization over few values: a near-constant channel amplifies rounding by up to 1/sqrt(eps)).

Parameters are written in fabench's arena order: the order backward produces the gradients, i.e.
the modules' forward call order reversed, weight before bias (models/nn.h).

Run with Debian's python3-torch:  /usr/bin/python3 scripts/torch_fixture.py [OUTDIR]
(default OUTDIR tests/models/fixtures). File format, little-endian: b"FBNNFIX1", u32 record count,
then per record: u32 name length, name, u32 dtype (0 f32, 1 i32, 2 bytes), u32 ndim, u32 dims, data.
"""
import copy
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 10
DRAWS = 16


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = None
        if stride != 1 or cin != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


def torchvision_resnet(blocks, block, cin, classes, width):
    """torchvision's ResNet (v1.5, stride on the 3x3), any width."""
    layers = [nn.Conv2d(cin, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    c = width
    for s, n in enumerate(blocks):
        for i in range(n):
            layers.append(block(c, width << s, 2 if s > 0 and i == 0 else 1))
            c = (width << s) * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def cifar_resnet(depth, cin, classes, width):
    """He et al. 2016 section 4.2, projection shortcuts."""
    n = (depth - 2) // 6
    layers = [nn.Conv2d(cin, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    c = width
    for s in range(3):
        for i in range(n):
            layers.append(Basic(c, width << s, 2 if s > 0 and i == 0 else 1))
            c = width << s
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


# name, builder, input CxHxW, classes, batch, SGD (lr, momentum, weight decay, nesterov)
CASES = [
    ("resnet8-w8", lambda: cifar_resnet(8, 3, 7, 8), (3, 11, 13), 7, 6, (0.05, 0.9, 5e-4, 0)),
    ("resnet18-w4", lambda: torchvision_resnet([2, 2, 2, 2], Basic, 1, 10, 4), (1, 28, 28), 10, 16, (0.01, 0.9, 1e-4, 1)),
    ("resnet50-w2", lambda: torchvision_resnet([3, 4, 6, 3], Bottleneck, 3, 6, 2), (3, 32, 32), 6, 16, (0.002, 0.9, 0.0, 0)),
]
TOL = 1e-4


def rel_err(got, ref):
    """The C test's measure: max |got - ref| / (|ref| + rms(ref))."""
    got, ref = got.double().reshape(-1), ref.double().reshape(-1)
    rms = ref.pow(2).mean().sqrt()
    return ((got - ref).abs() / (ref.abs() + rms + 1e-30)).max().item()


def run(model, x, labels, sgd, mods):
    """Logits, per-tensor gradients and the loss trajectory of STEPS SGD steps."""
    opt = torch.optim.SGD(model.parameters(), lr=sgd[0], momentum=sgd[1], weight_decay=sgd[2], nesterov=bool(sgd[3]))
    model.train()
    out = {}
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        if step == 0:
            out["logits"] = logits.detach().clone()
            out["loss"] = loss.detach().reshape(1).clone()
            out["grads"] = [g.detach().clone() for m in mods for g in
                            [m.weight.grad] + ([m.bias.grad] if m.bias is not None else [])]
            out["buffers"] = arena(mods, "buffers").clone()
        losses.append(loss.item())
        opt.step()
    out["losses"] = torch.tensor(losses, dtype=torch.float64)
    return out


def arena_modules(model, x):
    """Modules with parameters, in the order backward produces their gradients."""
    order = []
    hooks = [m.register_forward_hook(lambda m, i, o: order.append(m))
             for m in model.modules() if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.Linear))]
    with torch.no_grad():
        model.eval()
        model(x)
    for h in hooks:
        h.remove()
    return order[::-1]


def flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def arena(mods, what):
    out = []
    for m in mods:
        if what == "params":
            out += [m.weight] + ([m.bias] if m.bias is not None else [])
        elif what == "grads":
            out += [m.weight.grad] + ([m.bias.grad] if m.bias is not None else [])
        elif isinstance(m, nn.BatchNorm2d):
            out += [m.running_mean, m.running_var]
    return flat(out).detach()


def record(name, data, dtype):
    b = name.encode()
    dims = list(data.shape) if hasattr(data, "shape") else [len(data)]
    head = struct.pack("<I", len(b)) + b + struct.pack("<II", dtype, len(dims)) + struct.pack("<%dI" % len(dims), *dims)
    if dtype == 0:
        body = data.detach().to(torch.float32).contiguous().numpy().tobytes()
    elif dtype == 1:
        body = data.to(torch.int32).contiguous().numpy().tobytes()
    else:
        body = bytes(data)
    return head + body


def draw(seed, build, shape, classes, batch):
    torch.manual_seed(seed)
    model = build().double()
    with torch.no_grad():  # non-trivial BN affine parameters, so their gradients matter
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    x = torch.randn(batch, *shape, dtype=torch.float64)
    x = x.float().double()  # the C side gets exactly these float32 values
    labels = torch.randint(0, classes, (batch,))
    return model, x, labels


def relu_margin(model, x):
    """Smallest |ReLU input| relative to its tensor's rms. An input within float32 rounding of zero
    flips between implementations and changes the gradients by a finite step (a discontinuity, not
    an error), so the fixture uses the draw where that is least likely."""
    margins = []
    relu = F.relu

    def rec(t, *a, **k):
        margins.append((t.abs() / t.pow(2).mean().sqrt()).min().item())
        return relu(t, *a, **k)

    F.relu = rec
    try:
        with torch.no_grad():
            model.train()
            model(x)
    finally:
        F.relu = relu
    return min(margins)


def make(name, build, shape, classes, batch, sgd):
    best = max(range(1234, 1234 + DRAWS), key=lambda s: relu_margin(*draw(s, build, shape, classes, batch)[:2]))
    model, x, labels = draw(best, build, shape, classes, batch)
    margin = relu_margin(model, x)
    for m in model.modules():  # the margin probe ran a training forward: reset the statistics
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
    mods = arena_modules(model, x)
    with torch.no_grad():
        for m in mods:  # weights rounded to float32 too, as the C side loads them
            for p in m.parameters():
                p.copy_(p.float().double())
    params0 = arena(mods, "params")
    m32 = copy.deepcopy(model).float()
    mods32 = arena_modules(m32, x.float())
    r32 = run(m32, x.float(), labels, sgd, mods32)
    r = run(model, x, labels, sgd, mods)
    grad_err = max([rel_err(a, b) for a, b in zip(r32["grads"], r["grads"])] +
                   [rel_err(r32["logits"], r["logits"]), rel_err(r32["buffers"], r["buffers"])])
    traj_err = rel_err(r32["losses"], r["losses"])
    tol = [max(TOL, 4 * grad_err), max(TOL, 4 * traj_err)]
    recs = [
        record("model", name.encode(), 2),
        record("config", torch.tensor([shape[0], shape[1], shape[2], classes, batch, STEPS]), 1),
        record("sgd", torch.tensor(sgd, dtype=torch.float64), 0),
        record("tol", torch.tensor(tol, dtype=torch.float64), 0),
        record("x", x, 0),
        record("labels", labels, 1),
        record("params", params0, 0),
        record("logits", r["logits"], 0),
        record("loss", r["loss"], 0),
        record("grads", flat(r["grads"]), 0),
        record("buffers", r["buffers"], 0),
        record("losses", r["losses"], 0),
    ]
    data = b"FBNNFIX1" + struct.pack("<I", len(recs)) + b"".join(recs)
    return data, params0.numel(), r["losses"].tolist(), tol + [margin]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "models", "fixtures")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for case in CASES:
        data, n, losses, tol = make(*case)
        path = os.path.join(out, "nn_%s.bin" % case[0])
        with open(path, "wb") as f:
            f.write(data)
        print("%s: %d parameters, %d bytes, losses %.4f .. %.4f, tolerances %.2g (tensors) %.2g (trajectory), "
              "ReLU margin %.1e" % (path, n, len(data), losses[0], losses[-1], tol[0], tol[1], tol[2]))


if __name__ == "__main__":
    main()
