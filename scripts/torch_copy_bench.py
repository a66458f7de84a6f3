#!/usr/bin/env python3
"""The copy ceilings as PyTorch moves them: the peer of `fabench p2p --transport nccl --tests
d2d,h2d,d2h`, measured the same way: CUDA events around ITERS back-to-back copies on one stream,
after a warm-up, the best of ROUNDS; d2d counts bytes read plus written, as fabench does.
usage: torch_copy_bench.py [--sizes 256M,1G,4G] [--iters 10] [--rounds 3] [--device cuda:0]
Prints one line a test and size: RESULT test=d2d bytes=N gbs=X"""
import argparse

import torch


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def timed(fn, iters, rounds, stream):
    best = float("inf")
    with torch.cuda.stream(stream):
        fn()  # warm-up
        for _ in range(rounds):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            for _ in range(iters):
                fn()
            b.record(stream)
            b.synchronize()
            best = min(best, a.elapsed_time(b) / 1e3 / iters)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256M,1G,4G")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cuda:0")
    a = ap.parse_args()
    dev = torch.device(a.device)
    stream = torch.cuda.Stream(dev)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(dev)}", flush=True)
    for n in map(parse_size, a.sizes.split(",")):
        src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(1)
        dst = torch.empty_like(src)
        host = torch.empty(n, dtype=torch.uint8, pin_memory=True).fill_(2)
        tests = {
            "d2d": (lambda: dst.copy_(src), 2),
            "h2d": (lambda: dst.copy_(host, non_blocking=True), 1),
            "d2h": (lambda: host.copy_(src, non_blocking=True), 1),
        }
        for name, (fn, factor) in tests.items():
            t = timed(fn, a.iters, a.rounds, stream)
            print(f"RESULT test={name} bytes={n} gbs={factor * n / t / 1e9:.1f}", flush=True)
        del src, dst, host
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
