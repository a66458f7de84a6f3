#!/usr/bin/env python3
"""fabench accept on emulated clusters (fabench's own --emulate 4x1:1gbit, as root): one node's
link slowed with --emulate-slow is named, alone, with its evidence; a uniform cluster names
nobody. Each measures concurrent pairwise rounds (p2p --pairs rounds); the named node is
retested alone (one of its pairs) before it is named.

    accept_emu_test.py FABENCH

Needs root and iproute2; exits 77 (ctest's skip) with one line saying why otherwise. fabench
removes its namespaces itself; the test checks that none is left and removes its directory.
"""
import json, os, re, shutil, subprocess, sys, tempfile, time

SKIP = 77
RUN = ("p2p --emulate 4x1:1gbit{slow} --pairs rounds --tests bw --min-bytes 1M --max-bytes 1M "
       "--window 8 --time-per-size 0.2 --timeout 30")


def netns():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return set(l.split()[0] for l in r.stdout.splitlines() if l.strip())


def stale(names):
    """The namespaces whose owner (fb<pid>n<k>) has ended: ours are all ended by now, while
    another test's running set on this machine has its owner alive."""
    out = []
    for n in names:
        m = re.match(r"fb(\d+)n\d+$", n)
        if m and not os.path.exists("/proc/" + m.group(1)):
            out.append(n)
    return out


def accept(fabench, d, name, slow):
    rules = os.path.join(d, name + ".yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - name: pairs\n    run: %s\n    metric: bw\n"
                "    at_least: 0.8 x median of nodes\n  - name: link\n    run: %s\n    metric: bw\n"
                "    at_least: 0.7 x link\n" % (RUN.format(slow=slow), RUN.format(slow=slow)))
    out = os.path.join(d, name)
    t0 = time.monotonic()
    r = subprocess.run([fabench, "accept", "--rules", rules, "--out", out], capture_output=True, text=True, timeout=170)
    secs = time.monotonic() - t0
    print("%s: exit %d in %.1f s\n%s%s" % (name, r.returncode, secs, r.stdout, r.stderr), flush=True)
    with open(os.path.join(out, "accept.json")) as f:
        j = json.load(f)
    with open(os.path.join(out, "suspects.txt")) as f:
        sus = f.read()
    return r.returncode, j, sus


def main():
    fabench = sys.argv[1]
    if os.geteuid() != 0:
        print("skipped: emulated clusters need root")
        return SKIP
    if not shutil.which("ip") or not shutil.which("tc"):
        print("skipped: emulated clusters need iproute2 (ip, tc)")
        return SKIP
    before = netns()
    d = tempfile.mkdtemp(prefix="fabench-accept-emu-")
    try:
        rc, j, sus = accept(fabench, d, "slow", " --emulate-slow 2=400mbit")
        assert rc == 1, rc
        names = [(s["kind"], s["host"]) for s in j["suspects"]]
        assert names == [("host", "node2")], names
        ev = j["suspects"][0]["evidence"]
        assert ev.startswith("host node2: its links at 0.") and "of the median bw" in ev, ev
        assert "; alone 2->" in ev, ev  # retested alone before it was named
        assert j["suspects"][0]["rank"] == 2, j["suspects"][0]
        assert sus == "node2\n", sus
        verdict = {r["name"]: r["pass"] for r in j["rules"]}
        assert verdict == {"pairs": False, "link": False, "topology": True}, verdict

        rc, j, sus = accept(fabench, d, "uniform", "")
        assert rc == 0, rc
        assert j["suspects"] == [], j["suspects"]
        assert sus == "", sus
        left = stale(netns() - before)
        assert not left, "namespaces left: %s" % sorted(left)
    except AssertionError as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
