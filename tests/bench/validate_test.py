#!/usr/bin/env python3
"""fabench validate end to end on a tiny grid of emulated links: fitted on 1 Gbit/s and 2 nodes,
it predicts 2 Gbit/s (rate held out), 3 nodes (nodes held out) and both, beside the baselines
and the repeats of the first held-out cell and the most crowded one; the ablation table; report carries its section; a
second run with the same --out keeps every cell measured; bad flags are usage errors. Needs root and iproute2 (exit 77
without). Usage: validate_test.py FABENCH"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run(fab, args):
    return subprocess.run([fab, "validate"] + args, capture_output=True, text=True, timeout=600)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    fab = sys.argv[1]
    if os.geteuid() != 0:
        print("SKIP: validate: emulated links need root")
        return SKIP
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            print(f"SKIP: validate: emulated links need {tool} (iproute2)")
            return SKIP
    for bad, says in ((["--rates", "fast"], "'fast' is not a rate"),
                      (["--rates", "1gbit,2gbit", "--train-rates", "5gbit"], "'5gbit' is not one of --rates"),
                      (["--algo", "ps"], "'ps' is not ring, rhd, tree, dtree or hier"),
                      (["--rates", "1gbit", "--nodes", "2"], "no cell is held out"),
                      (["--repeat", "some"], "--repeat: 'some' is not ends, all or none"),
                      (["--no-measure"], "--no-measure: which run? (--out DIR)")):
        p = run(fab, bad)
        assert p.returncode == 2 and says in p.stderr, (bad, p.returncode, p.stderr[-500:])
    tmp = tempfile.mkdtemp(prefix="fabench-validate-")
    try:
        out = os.path.join(tmp, "v")
        args = ["--quick", "--rates", "1gbit,2gbit", "--nodes", "2,3", "--train-rates", "1gbit", "--steps", "8",
                "--batch", "8", "--rounds", "1", "--data", "synthetic:3x16x16:10:256", "--out", out]
        p = run(fab, args)
        assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
        v = rows(os.path.join(out, "validate.csv"))
        held = {r["cell"]: r["held"] for r in v if r["split"] == "held-out"}
        assert held == {"2gbit-2x1-ring-resnet20": "rate", "1gbit-3x1-ring-resnet20": "nodes",
                        "2gbit-3x1-ring-resnet20": "both"}, held
        for r in v:
            if r["split"] != "held-out":
                continue
            # every held-out figure is predicted, said so, with its baselines beside it
            assert r["pred_kind"] == "held-out" and float(r["t_pred"]) > 0 and float(r["t_meas"]) > 0, r
            assert abs(float(r["err"]) - (float(r["t_pred"]) - float(r["t_meas"])) / float(r["t_meas"])) < 1e-4, r
            assert float(r["t_bytes_link"]) > 0, r
            if r["what"] == "step":
                assert float(r["t_compute"]) > 0 and r["comm_share"] != "", r
        assert {r["what"] for r in v if r["split"] == "held-out"} == {"allreduce", "step"}
        assert all(int(r["bytes"]) >= 1 << 20 for r in v if r["what"] == "allreduce")
        # the repeats: the first held-out cell and the one of most ranks at the fastest rate,
        # measured again after every cell, beside the cells they repeat
        rep = {r["cell"] for r in v if r["split"] == "repeat"}
        assert rep == {"1gbit-3x1-ring-resnet20-repeat", "2gbit-3x1-ring-resnet20-repeat"}, rep
        for cell in ("1gbit-3x1-ring-resnet20", "2gbit-3x1-ring-resnet20"):
            first = [r for r in v if r["cell"] == cell]
            assert first and all(r["t_repeat"] != "" for r in first), first
        assert all(r["t_repeat"] == "" for r in v if r["cell"] == "2gbit-2x1-ring-resnet20")
        # the all-reduce judged again where the machine repeated itself within 10%
        steady = [r for r in v if r["split"] == "held-out" and r["what"] == "allreduce" and r["err_repeat"] != ""
                  and abs(float(r["err_repeat"])) <= 0.10]
        line = [ln for ln in p.stdout.splitlines() if "where it repeats within 10%" in ln]
        assert len(line) == 1 and int(line[0].split()[5]) == len(steady), (line, len(steady))
        # the training cells are replays of their own fit (the all-reduce it was fitted on)
        assert any(r["split"] == "train" and r["pred_kind"] == "replay" for r in v)
        a = rows(os.path.join(out, "validate_ablation.csv"))
        assert len(a) == 8 and {r["term"] for r in a} == {"curves", "cpu", "burst", "share"}, a
        md = open(os.path.join(out, "validate.md")).read()
        assert "## Validation" in md and "### Ablation" in md, md[:400]
        # the report over the run carries the section
        rep = os.path.join(tmp, "rep")
        p = subprocess.run([fab, "report", out, "--no-plot", "--out", rep], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "## Validation" in open(os.path.join(rep, "report.md")).read()
        # resumed: nothing is measured again
        p = run(fab, args)
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.count("done before (kept)") == 11 and " measured (" not in p.stdout, p.stdout
        assert len(rows(os.path.join(out, "validate.csv"))) == len(v)
        # --no-measure: priced again with a term off, nothing measured; the grid's flags must match
        env = dict(os.environ, FABENCH_MODEL_OFF="share")
        p = subprocess.run([fab, "validate", "--no-measure"] + args, capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0 and " measured (" not in p.stdout, (p.stdout[-2000:], p.stderr[-2000:])
        assert p.stdout.count("done before (kept)") == 11, p.stdout
        p = run(fab, ["--no-measure", "--out", out])
        assert p.returncode == 2 and "holds no cell" in p.stderr and " measured (" not in p.stdout, (p.stdout, p.stderr)
        assert not os.path.exists(os.path.join(out, "allreduce", "5gbit-2x1-ring")), os.listdir(os.path.join(out, "allreduce"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("validate: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
