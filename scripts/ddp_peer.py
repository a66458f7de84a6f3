#!/usr/bin/python3
"""PyTorch DDP peer of `fabench train -n N`: the same ResNets (scripts/torch_train_bench.py's
builders, which follow models/nn_resnet.c's layer table), per-rank batch, threads, SGD and synthetic
data; gloo backend; ranks on loopback or on emulated links (one network namespace per rank, shaped
with tc tbf by scripts/fabric-emu.sh, the scheme of `fabench --emulate`).

Run with Debian's python3-torch (1.13), not the first python3 on PATH:
    /usr/bin/python3 scripts/ddp_peer.py -n 2 --model resnet18 --data synthetic:3x32x32 \\
        --batch 64 --threads 1 --steps 40 --warmup-steps 10 [--emulate 1gbit] \\
        [--grad-dtype bf16] [--no-sync] [--bucket-mb 25] [--csv FILE]

--steps counts every step and --warmup-steps of them are left out of the figures, as in fabench.
--no-sync: every step runs inside DDP's no_sync(), so nothing is exchanged: the no-communication
baseline (role "ddp-nosync"), the peer of fabench's `--transport none`.
--zero: torch's ZeroRedundancyOptimizer over SGD (ZeRO stage 1: each rank updates its share of the
parameters and keeps that share's momentum; role "ddp-zero"), the peer of `fabench train --dp
sharded`. FSDP, the closer one, cannot run here: Debian's torch 1.13 fails to import it on Python
3.11 (a dataclass default 3.11 refuses), and with that worked around it still asserts CUDA.
--grad-dtype bf16|f16: gradients travel in 16 bits through a DDP comm hook. f16: DDP's own
fp16_compress_hook (gloo all-reduces in f16), or with --f16-hook ring ours. bf16: ours, a ring
all-reduce on gloo send/recv (ring_compress_hook), because torch 1.13 refuses bf16_compress_hook
without NCCL and its gloo cannot reduce bf16.
--emulate RATE: creates N namespaces on a shaped bridge with scripts/fabric-emu.sh (needs root) and
removes them at the end, also on failure or interruption. --netns NS0,NS1,...: run rank r in an
existing namespace NSr instead (its first global IPv4 address is used; rank 0's is the master).

Figures, as fabench computes them: images_per_s = global batch x measured steps / the slowest
rank's wall time over the measured steps (they start behind a barrier); step_ms = p50 of every
rank's measured step times pooled; images_per_s_rank = images_per_s / N. The last line printed is
`RESULT {json}`; --csv FILE appends a row (header written when the file is new). At the end the
ranks check that their parameters are bit-identical (not in --no-sync, where they differ by design).

The launcher starts the ranks as child processes (torchrun-style environment: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); `--worker` runs one rank from such an environment, so torchrun can start
them too: torchrun --nproc_per_node 2 scripts/ddp_peer.py --worker [options].

--self-test: the ring hook against a float64 reference on 1-3 ranks, short DDP runs in f32, bf16
and f16 ending with identical parameters, and the final check failing on a corrupted rank (~1 min).
"""
import argparse
import contextlib
import csv
import datetime
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = "ddp_peer"

CSV_COLUMNS = ["ranks", "transport", "algo", "model", "data", "batch", "global_batch", "bucket_mb",
               "grad_dtype", "hook", "threads", "steps", "warmup_steps", "measured_steps", "images_per_s",
               "images_per_s_rank", "step_ms", "step_ms_max_rank_p50", "final_loss", "fabric",
               "role", "params_identical", "torch"]


def leave(code):
    """A worker's exit: os._exit, before DDP's and gloo's objects are destroyed. torch 1.13
    sometimes hangs in those destructors (seen 1 run in 5 with the fp16 hook under load: the main
    thread returning from worker(), no Python frame below)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def die(msg, code=1):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--ranks", type=int, default=2)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--data", default="synthetic:3x32x32",
                    help="synthetic[:CxHxW[:CLASSES[:N]]] as fabench's --data")
    ap.add_argument("--batch", type=int, default=64, help="images per step per rank")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    ap.add_argument("--steps", type=int, default=40, help="all steps, warm-up included")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--grad-dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--f16-hook", default="stock", choices=["stock", "ring"],
                    help="f16: DDP's fp16_compress_hook (gloo all-reduce in f16) or our ring hook; "
                         "bf16 always uses the ring hook")
    ap.add_argument("--no-sync", action="store_true", help="every step inside no_sync()")
    ap.add_argument("--zero", action="store_true",
                    help="ZeroRedundancyOptimizer over SGD (ZeRO stage 1; role ddp-zero): the peer "
                         "of fabench's --dp sharded, since FSDP does not import in Debian's torch")
    ap.add_argument("--bind", default="none", choices=["none", "core"],
                    help="core: rank r on the r-th allowed CPU (as fabench --bind core)")
    ap.add_argument("--broadcast-buffers", action="store_true",
                    help="DDP broadcasts rank 0's BN buffers each forward (default off: BN stays "
                         "local, as in fabench)")
    ap.add_argument("--grad-as-bucket-view", action="store_true")
    ap.add_argument("--emulate", metavar="RATE", help="e.g. 1gbit: namespaces on a tbf-shaped bridge")
    ap.add_argument("--netns", metavar="NS0,NS1,...", help="existing namespaces, one per rank")
    ap.add_argument("--fabric", help="fabric column [gloo:lo, gloo:emu-RATE, gloo:netns]")
    ap.add_argument("--port", type=int, default=0, help="master port [free port on loopback, 29500 "
                                                        "in namespaces]")
    ap.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    ap.add_argument("--csv", help="append a row to this CSV file")
    ap.add_argument("--log-every", type=int, default=0)
    ap.add_argument("--test-corrupt-rank", type=int, default=-1, metavar="R",
                    help="test of the check: rank R perturbs one weight before the final check, "
                         "which must then fail")
    ap.add_argument("--self-test", action="store_true",
                    help="check the ring hook against a float64 reference on 1-3 ranks, short DDP "
                         "runs (f32, bf16, f16) for identical parameters, and the check's failure")
    ap.add_argument("--self-test-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help="run one rank from RANK/WORLD_SIZE/MASTER_*")
    a = ap.parse_args(argv)
    bad = lambda m: (ap.print_usage(sys.stderr), die(m, 2))
    if not 1 <= a.ranks <= 250:
        bad("-n must be 1..250")
    if a.batch < 1 or a.threads < 1 or a.steps < 1 or a.warmup_steps < 0:
        bad("--batch, --threads, --steps must be >= 1 and --warmup-steps >= 0")
    if a.warmup_steps >= a.steps:
        bad(f"--warmup-steps {a.warmup_steps} leaves no measured step of --steps {a.steps}")
    if a.bucket_mb <= 0:
        bad("--bucket-mb must be > 0")
    if a.emulate and a.netns:
        bad("--emulate and --netns exclude each other")
    if a.emulate and not re.fullmatch(r"[0-9]+(kbit|mbit|gbit)", a.emulate):
        bad(f"bad --emulate '{a.emulate}' (e.g. 500mbit, 1gbit)")
    if a.no_sync and a.grad_dtype != "f32":
        bad("--no-sync exchanges nothing: --grad-dtype does not apply")
    m = re.fullmatch(r"synthetic(?::([0-9]+)x([0-9]+)x([0-9]+)(?::([0-9]+)(?::([0-9]+))?)?)?", a.data)
    if not m:
        bad(f"bad --data '{a.data}': want synthetic[:CxHxW[:CLASSES[:N]]]")
    a.c, a.h, a.w = (int(v) for v in (m.group(1) or 3, m.group(2) or 32, m.group(3) or 32))
    a.classes = int(m.group(4) or 10)
    if not 1 <= a.c <= 3 or a.h < 1 or a.w < 1 or a.classes < 2:
        bad(f"bad --data '{a.data}': C 1..3, classes >= 2")
    per = a.c * a.h * a.w
    # fabench's default pool: 128 MiB of uint8 pixels, at most 1024 and at least 64 images
    a.pool = int(m.group(5)) if m.group(5) else max(64, min(1024, (128 << 20) // per))
    if a.fabric is None:
        a.fabric = ("gloo:emu-" + a.emulate) if a.emulate else "gloo:netns" if a.netns else "gloo:lo"
    return a


# ---------------------------------------------------------------------------------------------
# one rank

def synthetic_pool(a, torch):
    """fabench-like learnable synthetic images: a class-dependent level plus noise, as uint8, then
    normalized with mean 0.5 and std 0.25; identical on every rank (seeded)."""
    g = torch.Generator().manual_seed(a.seed * 7919 + 1)
    labels = torch.randint(0, a.classes, (a.pool,), generator=g)
    level = 32 + (160 * labels) // max(a.classes - 1, 1)
    noise = torch.randint(0, 64, (a.pool, a.c, a.h, a.w), generator=g)
    px = (level.view(-1, 1, 1, 1) + noise).float() / 255.0
    return ((px - 0.5) / 0.25).contiguous(), labels


def ring_compress_hook(torch, dist, rank, world, wire_dtype):
    """DDP comm hook: gradients travel in a 16-bit type over a ring all-reduce written with gloo's
    point-to-point send/recv, run on a communication thread so that it overlaps backward as DDP's
    own all-reduce does.

    Why not the stock hooks: torch 1.13's register_comm_hook refuses bf16_compress_hook without
    NCCL, and its gloo cannot reduce bf16 at all ("Invalid scalar type"); gloo's all_gather is
    slow (500 ms for 22 MB on 2 loopback ranks, against 84 ms for an f32 all-reduce of 44 MB).
    The ring moves what a 16-bit ring all-reduce moves: 2 (N-1)/N of the bucket in 16 bits per
    rank. Partial sums accumulate in f32 and are rounded to the wire type at each hop; every rank
    ends with the same rounded values, so parameters stay bit-identical."""
    import queue
    import threading

    PIECE = 1 << 19  # elements: 1 MiB in 16 bits
    jobs = queue.Queue()
    scratch = {}  # bucket index -> 16-bit send and receive, f32 scratch: no page faults per step

    def ring(buf, index):
        n = buf.numel()
        if index not in scratch or scratch[index][0].numel() != n:
            scratch[index] = (torch.empty(n, dtype=wire_dtype), torch.empty(n, dtype=wire_dtype),
                              torch.empty(n, dtype=torch.float32))
        send, recv, tmp = scratch[index]
        # copy_, not .to(): on torch 1.13's CPU build .to(bfloat16) and mixed-type add_ are
        # many times slower than copy_; gloo moves 16-bit words as float16 (it only copies them)
        wire = torch.float16
        bounds = [n * i // world for i in range(world + 1)]
        chunk = lambda t, i: t[bounds[i]:bounds[i + 1]]
        right, left = (rank + 1) % world, (rank - 1) % world

        def exchange(s, r):
            """Send s (16-bit) right while r arrives from the left, in pieces: gloo moves one large
            message each way at half the link rate on an emulated 1gbit link (192 ms for 11 MB
            both ways), pieces of 1 MiB at the full rate (93 ms)."""
            works = []
            for j, lo in enumerate(range(0, max(s.numel(), r.numel()), PIECE)):
                t = (tag[0] + j) % (1 << 30)
                if lo < s.numel():
                    works.append(dist.isend(s[lo:lo + PIECE].view(wire), right, tag=t))
                if lo < r.numel():
                    works.append(dist.irecv(r[lo:lo + PIECE].view(wire), left, tag=t))
            tag[0] += (bounds[1] + world + PIECE) // PIECE  # more pieces than any chunk has
            for x in works:
                x.wait()

        for s in range(world - 1):  # reduce-scatter: partial sums in f32, rounded on the wire
            si, ri = (rank - s) % world, (rank - s - 1) % world
            exchange(chunk(send, si).copy_(chunk(buf, si)), chunk(recv, ri))
            chunk(buf, ri).add_(chunk(tmp, ri).copy_(chunk(recv, ri)))
        own = (rank + 1) % world
        chunk(buf, own).div_(world)
        chunk(send, own).copy_(chunk(buf, own))
        chunk(buf, own).copy_(chunk(send, own))  # rounded as every other rank will see it
        for s in range(world - 1):  # all-gather: forward the 16-bit words as they came
            si, ri = (rank + 1 - s) % world, (rank - s) % world
            exchange(chunk(send if s == 0 else recv, si), chunk(recv, ri))
            chunk(buf, ri).copy_(chunk(recv, ri))
        return buf

    def loop():
        while True:
            buf, index, fut = jobs.get()
            try:
                fut.set_result(ring(buf, index))
            except Exception as e:  # the step fails with the cause, never hangs
                fut.set_exception(e)

    thread = threading.Thread(target=loop, name="ddp-ring", daemon=True)
    thread.start()
    tag = [0]  # the next message tag: every rank runs the same exchanges in the same order

    def hook(state, bucket):
        fut = torch.futures.Future()
        jobs.put((bucket.buffer(), bucket.index(), fut))
        return fut

    return hook


def self_test_worker(a):
    """The ring hook against an independent reference: every rank regenerates every rank's seeded
    input and sums them in float64; the hook's result must lie within the 16-bit rounding bound
    (one rounding per hop and one at the end, relative to the sum of magnitudes) and be
    bit-identical on every rank. Counts: 0, below the rank count, odd, several pieces."""
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))

    class Bucket:  # what a DDP comm hook sees of a bucket
        def __init__(self, t, i):
            self.t, self.i = t, i

        def buffer(self):
            return self.t

        def index(self):
            return self.i

    def data(q, n):
        return torch.randn(n, generator=torch.Generator().manual_seed(1000 * q + n)) * (q + 1)

    # unit roundoff, and the absolute step of the type's subnormals (f16's reach 6e-5)
    for name, dt, eps, tiny in (("bf16", torch.bfloat16, 2.0 ** -8, 2.0 ** -133),
                                ("f16", torch.float16, 2.0 ** -11, 2.0 ** -24)):
        hook = ring_compress_hook(torch, dist, rank, world, dt)
        for i, n in enumerate((0, 1, world - 1, 5, 1000003, 3 * (1 << 19) + 7)):
            got = hook(None, Bucket(data(rank, n), i)).wait()
            xs = [data(q, n).double() for q in range(world)]
            ref = sum(xs) / world
            bound = (world + 1) * (eps * sum(x.abs() for x in xs) / world + tiny) if n else ref
            bad = int((got.double() - ref).abs().gt(bound).sum()) if n else 0
            zero = got.clone()
            dist.broadcast(zero, 0)
            if bad or not torch.equal(zero.view(torch.int32), got.view(torch.int32)):
                raise RuntimeError(f"ring hook {name}, {n} values: {bad} beyond the rounding bound, "
                                   f"identical to rank 0: {torch.equal(zero, got)}")
    if rank == 0:
        print(f"{PROG}: self-test: ring hook (bf16, f16) on {world} rank(s) within bounds, identical")
    dist.destroy_process_group()
    leave(0)


def self_test(a, argv):
    """The hook on 1 to 3 ranks; a short DDP run per gradient type ends with identical parameters;
    the final check fails when a rank's weights are corrupted on purpose."""
    base = [x for x in argv if x != "--self-test"]
    for n in (1, 2, 3):
        if launch(parse_args(base + ["-n", str(n), "--self-test-worker"]), base + ["-n", str(n), "--self-test-worker"]):
            die(f"self-test: ring hook on {n} rank(s) failed")
    small = ["-n", "2", "--model", "resnet8", "--data", "synthetic:3x8x8:4:64", "--batch", "8",
             "--steps", "3", "--warmup-steps", "1", "--bucket-mb", "0.01"]
    for g in ("f32", "bf16", "f16"):
        run = base + small + ["--grad-dtype", g]
        if launch(parse_args(run), run):
            die(f"self-test: DDP with --grad-dtype {g} failed")
    run = base + small + ["--test-corrupt-rank", "1"]
    print(f"{PROG}: self-test: a corrupted rank must fail the check (errors below expected)", flush=True)
    if launch(parse_args(run), run) == 0:
        die("self-test: the parameter check passed a corrupted rank")
    print(f"{PROG}: self-test passed", flush=True)
    return 0


def worker(a):
    if a.bind == "core":  # before torch starts its threads, so they inherit it
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[int(os.environ["RANK"]) % len(cpus)]})
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, HERE)
    from torch_train_bench import build

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    torch.manual_seed(a.seed)
    model = build(a.model, a.c, a.classes).train()
    nparams = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb, broadcast_buffers=a.broadcast_buffers,
              gradient_as_bucket_view=a.grad_as_bucket_view)
    if a.grad_dtype != "f32":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        if a.grad_dtype == "f16" and a.f16_hook == "stock":
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
            hook_name = "fp16_compress_hook"
        else:
            wire = torch.bfloat16 if a.grad_dtype == "bf16" else torch.float16
            ddp.register_comm_hook(None, ring_compress_hook(torch, dist, rank, world, wire))
            hook_name = "ring_compress_hook"
    else:
        hook_name = "none"
    if a.zero:  # ZeRO stage 1: each rank keeps and updates its share of the optimizer state
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD, lr=a.lr,
                                      momentum=a.momentum, weight_decay=a.wd)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd)
    px, labels = synthetic_pool(a, torch)

    def flat_params():
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def identical():
        """Bit-identical parameters on every rank? Returns the ranks that differ from rank 0."""
        mine = flat_params()
        ref = mine.clone()
        dist.broadcast(ref, 0)
        same = bool(torch.equal(mine.view(torch.int32), ref.view(torch.int32)))
        flags = [None] * world
        dist.all_gather_object(flags, same)
        return [r for r, s in enumerate(flags) if not s]

    differ = identical()  # DDP's constructor broadcast rank 0's weights
    if differ:
        raise RuntimeError(f"parameters differ from rank 0's after DDP set-up on ranks {differ}")

    # each rank reads a disjoint shard of a per-epoch permutation, as fabench does
    g = torch.Generator().manual_seed(a.seed)
    per_epoch = a.pool // (a.batch * world)
    if per_epoch < 1:
        raise RuntimeError(f"synthetic pool of {a.pool} images holds no global batch of "
                           f"{a.batch * world} (raise N in --data synthetic:CxHxW:CLASSES:N)")
    perm, pos = None, per_epoch
    times, loss, t_start = [], float("nan"), None
    for step in range(a.steps):
        if step == a.warmup_steps:
            dist.barrier()
            t_start = time.perf_counter()
        t0 = time.perf_counter()
        if pos == per_epoch:
            perm, pos = torch.randperm(a.pool, generator=g), 0
        lo = (pos * world + rank) * a.batch
        idx = perm[lo:lo + a.batch]
        pos += 1
        x, y = px.index_select(0, idx), labels.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        with ddp.no_sync() if a.no_sync else contextlib.nullcontext():
            out = ddp(x)
            l = F.cross_entropy(out, y)
            l.backward()
        opt.step()
        loss = l.item()
        dt = time.perf_counter() - t0
        if step >= a.warmup_steps:
            times.append(dt)
        if a.log_every and rank == 0 and (step + 1) % a.log_every == 0:
            print(f"step {step + 1} loss {loss:.4f} {1e3 * dt:.1f} ms", flush=True)
    wall = time.perf_counter() - t_start

    if rank == a.test_corrupt_rank:
        with torch.no_grad():
            next(model.parameters()).view(-1)[0] += 1e-3
    per_rank = [None] * world
    dist.all_gather_object(per_rank, {"wall": wall, "times": times, "loss": loss})
    differ = [] if a.no_sync else identical()
    dist.barrier()
    if rank == 0:
        meas = a.steps - a.warmup_steps
        slowest = max(r["wall"] for r in per_rank)
        ips = world * a.batch * meas / slowest
        pooled = [t for r in per_rank for t in r["times"]]
        res = {
            "ranks": world, "transport": "gloo", "algo": "ddp", "model": a.model, "data": a.data,
            "batch": a.batch, "global_batch": world * a.batch, "bucket_mb": a.bucket_mb,
            "grad_dtype": a.grad_dtype, "hook": hook_name, "threads": a.threads, "steps": a.steps,
            "warmup_steps": a.warmup_steps, "measured_steps": meas,
            "images_per_s": ips, "images_per_s_rank": ips / world,
            "step_ms": 1e3 * statistics.median(pooled),
            "step_ms_max_rank_p50": 1e3 * max(statistics.median(r["times"]) for r in per_rank),
            "final_loss": loss, "fabric": a.fabric, "role": "ddp-nosync" if a.no_sync else "ddp-zero" if a.zero else "ddp",
            "params_identical": "n/a" if a.no_sync else ("yes" if not differ else "no"),
            "torch": torch.__version__, "params": nparams,
            "step_ms_p50_per_rank": [1e3 * statistics.median(r["times"]) for r in per_rank],
            "wall_s_per_rank": [r["wall"] for r in per_rank],
        }
        if a.csv:
            new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
            with open(a.csv, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(CSV_COLUMNS)
                w.writerow([("%.6g" % res[k]) if isinstance(res[k], float) else res[k]
                            for k in CSV_COLUMNS])
        print(f"{PROG}: {res['role']} {world} ranks x {a.threads} thread(s), {a.model} "
              f"{a.c}x{a.h}x{a.w} batch {a.batch}/rank, {res['fabric']}, bucket {a.bucket_mb:g} MB, "
              f"grad {a.grad_dtype}: {ips:.1f} images/s, step p50 {res['step_ms']:.1f} ms "
              f"({meas} measured steps), params identical: {res['params_identical']}", flush=True)
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()
    if differ:
        raise RuntimeError(f"parameters differ from rank 0's at the end (step {a.steps}) on ranks {differ}")
    leave(0)  # with the model still referenced (see leave)


# ---------------------------------------------------------------------------------------------
# launcher

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def netns_endpoint(ns):
    """(interface, IPv4 address) of the first global IPv4 address in namespace ns."""
    out = subprocess.run(["ip", "-n", ns, "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        die(f"namespace '{ns}': {out.stderr.strip() or 'ip failed'}")
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            return f[1], f[3].split("/")[0]
    die(f"namespace '{ns}' has no global IPv4 address")


def emu_setup(n, rate, set_id):
    """N namespaces on a shaped bridge via fabric-emu.sh; returns [(ns, dev, addr)]."""
    if os.geteuid() != 0:
        die("--emulate needs root (network namespaces, tc)")
    out = subprocess.run([os.path.join(HERE, "fabric-emu.sh"), "setup", str(n), rate, str(set_id)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("fabric-emu.sh setup failed: " + (out.stderr.strip() or out.stdout.strip()))
    ranks = re.findall(r"^rank (\d+): netns (\S+) dev (\S+) addr (\S+)", out.stdout, re.M)
    if len(ranks) != n:
        raise RuntimeError("fabric-emu.sh setup: unexpected output: " + out.stdout.strip())
    return [(ns, dev, addr) for _, ns, dev, addr in ranks]


def emu_teardown(set_id):
    subprocess.run([os.path.join(HERE, "fabric-emu.sh"), "teardown", str(set_id)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def launch(a, argv):
    """Start a.ranks workers, wait for all, kill the rest when one fails or time runs out."""
    set_id = None
    procs = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if a.emulate:
            set_id = os.getpid()  # fabric-emu.sh's convention: the set's id is its owner's pid
            eps = emu_setup(a.ranks, a.emulate, set_id)
        elif a.netns:
            names = a.netns.split(",")
            if len(names) != a.ranks:
                die(f"--netns gives {len(names)} namespace(s) for -n {a.ranks}", 2)
            eps = [(ns,) + netns_endpoint(ns) for ns in names]
        else:
            eps = [(None, "lo", "127.0.0.1")] * a.ranks
        port = a.port or (free_port() if not (a.emulate or a.netns) else 29500)
        base = {k: v for k, v in os.environ.items()}
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            base[k] = str(a.threads)
        base.update(WORLD_SIZE=str(a.ranks), MASTER_ADDR=eps[0][2], MASTER_PORT=str(port),
                    LOCAL_WORLD_SIZE=str(a.ranks))
        for r, (ns, dev, _addr) in enumerate(eps):
            env = dict(base, RANK=str(r), LOCAL_RANK=str(r), GLOO_SOCKET_IFNAME=dev)
            cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + argv
            if ns:
                cmd = ["ip", "netns", "exec", ns] + cmd
            procs.append(subprocess.Popen(cmd, env=env, start_new_session=True))
        deadline = time.monotonic() + a.timeout + 60
        while True:
            codes = [p.poll() for p in procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                raise RuntimeError(f"rank {failed[0]} exited with status {codes[failed[0]]}"
                                   f"{' (host ' + socket.gethostname() + ')'}")
            if all(c == 0 for c in codes):
                return 0
            if time.monotonic() > deadline:
                late = [r for r, c in enumerate(codes) if c is None]
                for r in late:  # their Python stacks to stderr (faulthandler), then they are killed
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(procs[r].pid, signal.SIGUSR1)
                time.sleep(1)
                raise RuntimeError(f"ranks {late} still running after --timeout {a.timeout:g} s")
            time.sleep(0.1)
    except (RuntimeError, KeyboardInterrupt) as e:
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if set_id is not None:
            emu_teardown(set_id)
        for s, h in old.items():
            signal.signal(s, h)


def main(argv):
    a = parse_args(argv)
    if a.self_test:
        return self_test(a, argv)
    if a.worker:
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        try:
            leave(self_test_worker(a) if a.self_test_worker else worker(a))
        except Exception as e:  # one line naming the rank, host and cause
            print(f"{PROG}: rank {os.environ.get('RANK', '?')} on {socket.gethostname()}: {e}",
                  file=sys.stderr)
            leave(1)  # here, while the exception still holds the worker's frame
    return launch(a, argv)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
