#!/usr/bin/python3
"""Writes tests/models/fixtures/nn_optim.txt: torch.optim.Adam and AdamW run for a few steps on
fixed tensors, which tests/models/test_nn_optim.c compares models/nn_optim.c against element by
element.

PyTorch computes here in float32, as fabench does, so the fixture is a peer of the C code rather
than a higher-precision reference: the two may differ by float32 rounding only (a fused
multiply-add here or there), not by any difference of formula (bias correction, where eps goes,
coupled or decoupled weight decay).

Each case: a line "case KIND LR BETA1 BETA2 EPS WD STEPS N", then lines "NAME v1 v2 ...": p0 (the
start), g1..gSTEPS (the gradient of each step), and after each step s: p<s>, m<s> (exp_avg) and
v<s> (exp_avg_sq). Values are float32 written as hexadecimal floats (exact; C's strtof reads them).
The learning rate is a float32 value too, since fabench keeps it in one.

Run with Debian's python3-torch:  /usr/bin/python3 scripts/torch_optim_fixture.py [OUTFILE]
"""
import struct
import sys

import torch

N = 67  # not a multiple of any vector width
STEPS = 6
CASES = [  # kind, lr, beta1, beta2, eps, weight decay
    ("adam", 1e-3, 0.9, 0.999, 1e-8, 0.0),
    ("adam", 1e-2, 0.8, 0.99, 1e-6, 1e-2),
    ("adamw", 1e-3, 0.9, 0.999, 1e-8, 1e-2),
    ("adamw", 5e-2, 0.85, 0.995, 1e-7, 0.1),
]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def line(name, t):
    return name + " " + " ".join(float(v).hex() for v in t.tolist()) + "\n"


def case(kind, lr, b1, b2, eps, wd, gen):
    lr = f32(lr)
    # magnitudes from 1e-4 to 10, some zero gradients, some weights at zero
    p = (torch.randn(N, generator=gen) * torch.logspace(-4, 1, N)).float()
    p[5] = 0.0
    grads = []
    for s in range(STEPS):
        g = (torch.randn(N, generator=gen) * torch.logspace(1, -4, N)).float()
        g[7] = 0.0
        g[11 + s] = 0.0
        grads.append(g)
    param = torch.nn.Parameter(p.clone())
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    opt = cls([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    out = "case %s %s %r %r %r %r %d %d\n" % (kind, float(lr).hex(), b1, b2, eps, wd, STEPS, N)
    out += line("p0", p)
    for s, g in enumerate(grads):
        out += line("g%d" % (s + 1), g)
    for s, g in enumerate(grads):
        param.grad = g.clone()
        opt.step()
        st = opt.state[param]
        out += line("p%d" % (s + 1), param.detach())
        out += line("m%d" % (s + 1), st["exp_avg"])
        out += line("v%d" % (s + 1), st["exp_avg_sq"])
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/models/fixtures/nn_optim.txt"
    gen = torch.Generator().manual_seed(54)
    text = "".join(case(*c, gen) for c in CASES)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
