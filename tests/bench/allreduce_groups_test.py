#!/usr/bin/env python3
"""allreduce --pairs and --nodes, and accept naming from them.

    allreduce_groups_test.py FABENCH loopback   # -n ranks on this host: the groups' rows, refusals
    allreduce_groups_test.py FABENCH emu        # emulated clusters (root): a slow node named, alone

loopback: --pairs rounds covers every pair once, N/2 disjoint pairs a round; --pairs all one pair
a step; --pairs S,D that pair; --nodes alone every rank of the host (busbw = algbw x 2(n-1)/n);
every row verified; bad flags refused with exit 2 and the flag named.
emu: pairs of an emulated 4x1 cluster with node2 slowed name node2 alone (retested alone), a
uniform one nobody, and the uniform run with node3's recorded topology changed names node3 first
with what differs; --nodes alone on 3x2 with node1's link slowed names nobody (the link is not
the node's fabric inside); --nodes ref on 4x1 with node1 slowed names node1 alone. Exits 77
(ctest's skip) without root or iproute2.
"""
import csv, itertools, json, os, re, shutil, subprocess, sys, tempfile

SKIP = 77
SWEEP = ["--transport", "tcp", "--algo", "ring,native", "--min-bytes", "64K", "--max-bytes", "64K",
         "--time-per-size", "0.05", "--warmup", "2", "--timeout", "30"]


def run(fabench, args, want=0):
    r = subprocess.run([fabench] + args, capture_output=True, text=True, timeout=120)
    if r.returncode != want:
        sys.exit("fabench %s: exit %d, wanted %d\n%s%s" % (" ".join(args), r.returncode, want, r.stdout, r.stderr))
    return r


def rows(d):
    with open(os.path.join(d, "allreduce_groups.csv")) as f:
        return list(csv.DictReader(f))


def loopback(fabench, d):
    out = os.path.join(d, "rounds")
    run(fabench, ["allreduce", "-n", "4", "--pairs", "rounds", "--out", out] + SWEEP)
    rs = rows(out)
    pairs = sorted((int(r["src"]), int(r["dst"])) for r in rs)
    assert pairs == list(itertools.combinations(range(4), 2)), pairs
    by_round = {}
    for r in rs:
        assert r["group"] == "pair" and r["mode"] == "rounds" and r["ranks"] == "2", r
        assert r["algo"] == "ring" and r["errors"] == "0", r
        assert abs(float(r["busbw_gbps"]) - float(r["algbw_gbps"])) < 1e-6 * float(r["algbw_gbps"]), r  # two ranks: factor 1
        assert abs(float(r["algbw_gbps"]) - 65536 / (float(r["t_p50_us"]) * 1e3)) < 1e-3 * float(r["algbw_gbps"]), r
        by_round.setdefault(int(r["round"]), []).extend([int(r["src"]), int(r["dst"])])
    assert sorted(by_round) == [0, 1, 2], by_round
    assert all(sorted(v) == [0, 1, 2, 3] for v in by_round.values()), by_round  # disjoint, everyone

    out = os.path.join(d, "all")
    run(fabench, ["allreduce", "-n", "3", "--pairs", "all", "--out", out] + SWEEP)
    rs = rows(out)
    got = [(int(r["round"]), int(r["src"]), int(r["dst"])) for r in rs]
    assert got == [(0, 0, 1), (1, 0, 2), (2, 1, 2)], got  # one pair a step

    out = os.path.join(d, "one")
    run(fabench, ["allreduce", "-n", "3", "--pairs", "2,0", "--out", out] + SWEEP)
    got = [(r["mode"], int(r["src"]), int(r["dst"])) for r in rows(out)]
    assert got == [("one", 2, 0)], got

    out = os.path.join(d, "alone")
    run(fabench, ["allreduce", "-n", "4", "--nodes", "alone", "--out", out] + SWEEP)
    rs = rows(out)
    assert len(rs) == 1 and rs[0]["group"] == "node" and rs[0]["ranks"] == "4", rs
    assert rs[0]["src_host"] == rs[0]["dst_host"] and rs[0]["dst"] == "-1", rs
    assert abs(float(rs[0]["busbw_gbps"]) / float(rs[0]["algbw_gbps"]) - 1.5) < 1e-4, rs

    for args, msg in [(["--pairs", "1,1"], "--pairs: '1,1'"), (["--pairs", "x"], "--pairs: 'x'"),
                      (["--nodes", "sideways"], "--nodes: 'sideways'"),
                      (["--pairs", "all", "--nodes", "alone"], "exclude each other"),
                      (["--pairs", "all", "--timing", "pipelined"], "barrier timing only"),
                      (["--pairs", "all", "--op", "sum,max"], "one --op"),
                      (["-n", "2", "--pairs", "0,5"], "there are 2 ranks")]:
        r = run(fabench, ["allreduce"] + args + ["--out", os.path.join(d, "refused")], want=2)
        assert msg in r.stderr, (args, r.stderr)
    assert not os.path.exists(os.path.join(d, "refused"))
    r = run(fabench, ["allreduce", "--help"])
    assert "--pairs S,D|all|rounds" in r.stdout and "--nodes alone|ref" in r.stdout, r.stdout
    print("loopback: ok")
    return 0


def accept(fabench, d, name, run_, rule):
    rules = os.path.join(d, name + ".yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - name: g\n    run: %s\n    metric: busbw\n    %s\n" % (run_, rule))
    out = os.path.join(d, name)
    r = subprocess.run([fabench, "accept", "--rules", rules, "--out", out], capture_output=True, text=True, timeout=120)
    print("%s: exit %d\n%s%s" % (name, r.returncode, r.stdout, r.stderr), flush=True)
    with open(os.path.join(out, "accept.json")) as f:
        return r.returncode, json.load(f)


def emu(fabench, d):
    if os.geteuid() != 0:
        print("skipped: emulated clusters need root")
        return SKIP
    if not shutil.which("ip") or not shutil.which("tc"):
        print("skipped: emulated clusters need iproute2 (ip, tc)")
        return SKIP
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    common = "--transport tcp --algo ring --min-bytes 1M --max-bytes 1M --time-per-size 0.2 --timeout 30"
    pairs = "allreduce --emulate 4x1:1gbit%s --pairs rounds " + common
    rc, j = accept(fabench, d, "pairs-slow", pairs % " --emulate-slow 2=400mbit", "at_least: 0.8 x median of nodes")
    names = [(s["kind"], s["host"], s["rank"]) for s in j["suspects"]]
    assert rc == 1 and names == [("host", "node2", 2)], (rc, names)
    ev = j["suspects"][0]["evidence"]
    assert re.match(r"host node2: its links at 0\.\d+ of the median busbw", ev) and "; alone 2->3" in ev, ev
    rc, j = accept(fabench, d, "pairs-uniform", pairs % "", "at_least: 0.8 x median of nodes")
    assert rc == 0 and j["suspects"] == [], (rc, j["suspects"])

    # a node whose recorded topology differs (the uniform run's node3 given another machine's
    # hash and hwloc XML): named first, with what differs, and the topology fails
    odd = os.path.join(d, "odd-topo")
    shutil.copytree(os.path.join(d, "pairs-uniform", "g"), odd)
    with open(os.path.join(odd, "run.json")) as f:
        meta = json.load(f)
    for h in meta["hosts"]:
        if h["host"] == "node3":
            h["topo_hash"] = "eeeeffff00001111"
    with open(os.path.join(odd, "run.json"), "w") as f:
        json.dump(meta, f)
    run(fabench, ["topo", "--synthetic", "pack:1 core:1 pu:1", "--xml", os.path.join(odd, "topo-node3.xml"),
                  "--out", os.path.join(d, "synthetic")])
    r = subprocess.run([fabench, "accept", "--rules", os.path.join(d, "pairs-uniform.yaml"), "--out",
                        os.path.join(d, "odd"), "--from", odd], capture_output=True, text=True, timeout=60)
    with open(os.path.join(d, "odd", "accept.json")) as f:
        j = json.load(f)
    topo = [x for x in j["rules"] if x["name"] == "topology"][0]
    first = j["suspects"][0]
    assert r.returncode == 1 and not topo["pass"], (r.returncode, topo, r.stdout)
    assert first["host"] == "node3" and "differs from the majority" in first["evidence"], j["suspects"]

    alone = "allreduce --emulate 3x2:1gbit --emulate-slow 1=200mbit --nodes alone " + common
    rc, j = accept(fabench, d, "nodes-alone", alone, "at_least: 0.01 GB/s")
    assert rc == 0 and j["suspects"] == [], (rc, j["suspects"])
    rs = rows(os.path.join(d, "nodes-alone", "g"))
    assert sorted(r["src_host"] for r in rs) == ["node0", "node1", "node2"], rs

    ref = "allreduce --emulate 4x1:1gbit --emulate-slow 1=200mbit --nodes ref " + common
    rc, j = accept(fabench, d, "nodes-ref", ref, "at_least: 0.8 x median of nodes")
    names = [(s["kind"], s["host"]) for s in j["suspects"]]
    assert rc == 1 and names == [("host", "node1")], (rc, names)
    rs = rows(os.path.join(d, "nodes-ref", "g"))
    assert sorted((r["src_host"], r["dst_host"]) for r in rs) == [("node1", "node0"), ("node2", "node0"), ("node3", "node0")], rs
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    left = [n for n in after - before if re.match(r"fb(\d+)n\d+$", n) and not os.path.exists("/proc/" + n[2:].split("n")[0])]
    assert not left, left
    print("emu: ok")
    return 0


def main():
    fabench, mode = sys.argv[1], sys.argv[2]
    d = tempfile.mkdtemp(prefix="fabench-groups-")
    try:
        return loopback(fabench, d) if mode == "loopback" else emu(fabench, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
