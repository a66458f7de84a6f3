#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/<target>/seed-*: small valid (and a few
near-valid) inputs in each target's framing (see the comment at the top of fuzz_<target>.c).
Regression inputs (findings, kept after their fix) live beside them as regress-*."""
import os, struct, sys, zlib

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def idx_pair(n, rows, cols):
    img = struct.pack(">IIII", 0x803, n, rows, cols) + bytes((i * 37) & 255 for i in range(n * rows * cols))
    lab = struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))
    return struct.pack("<H", len(img)) + img + lab


put("idx", "3x4x4", idx_pair(3, 4, 4))
put("idx", "1x28x28", idx_pair(1, 28, 28))
bad = bytearray(idx_pair(2, 2, 2)); bad[-1] = 10  # a label out of range
put("idx", "badlabel", bytes(bad))

REC = 3073
def cifar_rec(label, k):
    return bytes([label]) + bytes((k * 13 + i) & 255 for i in range(REC - 1))
put("cifar", "1file", bytes([0]) + cifar_rec(3, 1) + cifar_rec(9, 2))
put("cifar", "2files", bytes([1]) + cifar_rec(0, 1) + cifar_rec(5, 2))
put("cifar", "short", bytes([0]) + cifar_rec(1, 1)[:100])


def ckpt(n_params, n_mom, n_buf, model=b"resnet8", data=b"synthetic:3x32x32"):
    h = bytearray(512)
    h[0:8] = b"FABCKPT\n"
    struct.pack_into("<II", h, 8, 1, 512)
    h[16:16 + len(model)] = model
    h[48:48 + len(data)] = data
    struct.pack_into("<7i", h, 304, 3, 32, 32, 10, 8, 0, 1)
    struct.pack_into("<QqqqdQQQ", h, 332, 42, 1, 2, 30, 1.5, n_params, n_mom, n_buf)
    body = bytes(h) + struct.pack("<%df" % (n_params + n_mom + n_buf),
                                  *[float(i) for i in range(n_params + n_mom + n_buf)])
    return body + struct.pack("<I", zlib.crc32(body))
put("ckpt", "valid", bytes([0]) + ckpt(3, 3, 2))
put("ckpt", "fixcrc", bytes([1]) + ckpt(1, 1, 0))
put("ckpt", "empty", bytes([1]) + ckpt(0, 0, 0))


def frame(tag, payload, seq):
    words = [0x46425450, tag, len(payload) & 0xffffffff, len(payload) >> 32, seq]
    check = 0x9e3779b9
    for w in words:
        check ^= w
    return struct.pack("<IIIIII", *words, check) + payload
def tcp(msgs):
    head = bytes([len(msgs) - 1])
    wire = b""
    for i, (tag, payload) in enumerate(msgs):
        head += struct.pack("<BH", tag, len(payload))
        wire += frame(tag, payload, i)
    return head + wire
put("tcp", "one", tcp([(7, b"hello")]))
put("tcp", "three", tcp([(1, b"a" * 10), (2, b""), (3, bytes(range(200)))]))
put("tcp", "four", tcp([(9, b"x"), (9, b"y" * 64), (0, b"z"), (255, b"w" * 300)]))
t = bytearray(tcp([(4, b"abc")])); t[-1] ^= 1  # payload damage is not the header's business
put("tcp", "cut", bytes(t[:-2]))

HOST = 64
def hello(rank, size, token=b"fuzz-token", host=b"nodeA"):
    return struct.pack("<IIii", 0x46424231, 1, rank, size) + token.ljust(64, b"\0") + host.ljust(HOST, b"\0")
def reply(status, reason=b""):
    return struct.pack("<Ii", 0x46424252, status) + reason.ljust(192, b"\0")
def gframe(nbytes):
    return struct.pack("<IIQ", 0x46424147, 0, nbytes)
# mode 0 (admit), size byte s -> n = 2 + s % 7
put("boot", "admit", bytes([0, 2]) + hello(1, 4))
put("boot", "admit-badtoken", bytes([0, 2]) + hello(2, 4, token=b"other"))
# mode 1 (join): rank = 1 + len(rest) % (n - 1); n = 2 -> rank 1
put("boot", "join", bytes([1, 0]) + reply(0) + b"".join(f"node{r}".encode().ljust(HOST, b"\0") for r in range(2)))
put("boot", "join-rejected", bytes([1, 0]) + reply(1, b"wrong job token"))
# mode 2 (rank 1 gathers): bytes = 1 + len(rest) % 64, n = 2 + s % 7
# n = 2 and 47 bytes each: 16 + 2 * 47 = 110, and 1 + 110 % 64 = 47
put("boot", "gather-peer", bytes([2, 0]) + gframe(2 * 47) + bytes(range(94)))
# mode 3 (rank 0 gathers from n-1 peers): bytes = 1 + len(rest) % 16
# n = 3, two peers of 15 bytes: 2 * (16 + 15) = 62, and 1 + 62 % 16 = 15
piece = gframe(15) + b"0123456789abcde"
put("boot", "gather-root", bytes([3, 1]) + piece * 2)

with open(os.path.join(here, "..", "topo", "fixtures", "vm.xml"), "rb") as f:
    put("topo", "vm.xml", f.read())
with open(os.path.join(here, "..", "topo", "fixtures", "cpuonly.xml"), "rb") as f:
    put("topo", "cpuonly.xml", f.read())
put("topo", "tiny.xml", b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
    b'<topology version="2.0">\n <object type="Machine" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" '
    b'allowed_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">\n'
    b'  <object type="NUMANode" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" '
    b'complete_nodeset="0x00000001" gp_index="2" local_memory="1000000"/>\n'
    b'  <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" '
    b'complete_nodeset="0x00000001" gp_index="3"/>\n </object>\n</topology>\n')
# rundir (fabench report's reader): the files of a run directory, each after a "=== NAME" line.
# From the report tests' synthetic run (CSV); seed-jsonl and seed-model were cut from real runs'
# allreduce.jsonl, predict.jsonl and model.json (fabench allreduce, predict, fit).
run1 = os.path.join(here, "..", "results", "fixtures", "run1")
def rundir(names):
    parts = []
    for n in names:
        with open(os.path.join(run1, n), "rb") as f:
            parts.append(b"=== " + n.encode() + b"\n" + f.read())
    return b"".join(parts)
put("rundir", "run1", rundir(["run.json", "allreduce.csv", "p2p.csv", "p2p_matrix.csv", "train.csv", "train_buckets.csv"]))
put("rundir", "allreduce", rundir(["allreduce.csv"]))
put("rundir", "train", rundir(["run.json", "train.csv", "train_buckets.csv"]))
put("rundir", "newer-schema", b'=== run.json\n{"schema": 2}\n' + rundir(["p2p.csv"]))
print("seeds written under", out)
