#!/usr/bin/env python3
"""Fault matrix: a rank killed (SIGKILL), stopped (SIGSTOP) or, on an emulated fabric, its link
taken down, at a random point of a fabench command, for every transport.

Every case must end within --timeout plus 5 s of the fault, with a non-zero exit and an error
that names a rank and this host (the victim itself where it died: its peers see it at once);
afterwards no process of the job, no network namespace or link of its emulated fabric, no
orphaned shared-memory segment and no temporary file may be left; every row already written
must parse, with no partial last line.

    fault_matrix.py FABENCH [--only SUBSTR] [--seed N] [--timeout S]

A case is a command (COMMANDS), a transport and a fault; adding a command to the matrix is one
line in COMMANDS. The seed (printed; FAULT_SEED or --seed) fixes the victims and the moments.
"""
import argparse, csv, io, json, os, random, re, shutil, signal, socket, subprocess, sys, tempfile, time

# command -> (arguments after the binary, ranks). Sizes are small so a run lasts a few seconds.
COMMANDS = {
    "allreduce": (["allreduce", "--max-bytes", "256K", "--time-per-size", "0.3", "--rounds", "2"], 3),
    "p2p": (["p2p", "--max-bytes", "256K", "--time-per-size", "0.2"], 2),
    "train": (["train", "--data", "synthetic:1x8x8:10:256", "--model", "resnet8-w4", "--batch", "8",
               "--steps", "200000", "--threads", "1", "--eval-every", "0", "--no-single"], 2),
}
# per transport: the algorithms of the all-reduce cases (mpi's own MPI_Allreduce has no timeout)
ALGOS = {"tcp": "ring,rd", "ucx": "ring,rd", "mpi": "ring,native"}
TRANSPORTS = ["tcp", "ucx", "mpi"]
FAULTS = ["kill", "stop", "linkdown"]  # linkdown: emulated fabrics only
GRACE_S = 5.0
EMU_RATE = "2gbit"

HOST = socket.gethostname()


def procs():
    """pid -> (ppid, exe) for every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            try:
                exe = os.readlink(f"/proc/{d}/exe")
            except OSError:
                exe = ""
            out[int(d)] = (ppid, exe)
        except (OSError, ValueError):
            pass
    return out


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    env = {}
    for kv in items:
        k, _, v = kv.partition(b"=")
        env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def descendants(root, table):
    kids = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def find_ranks(launcher, binary, n):
    """rank -> pid of the job's rank processes, once all n are running."""
    table = procs()
    ranks = {}
    for pid in descendants(launcher, table):
        if os.path.realpath(table[pid][1]) != binary:
            continue
        env = environ(pid)
        r = env.get("OMPI_COMM_WORLD_RANK", env.get("FABENCH_RANK"))
        if r is not None and r.isdigit():
            ranks[int(r)] = pid
    return ranks if len(ranks) == n else None


def job_processes(token):
    """Every process that carries this job's token (ranks, mpirun and its helpers)."""
    left = []
    for pid in procs():
        if pid != os.getpid() and environ(pid).get("FABENCH_TOKEN") == token:
            left.append(pid)
    return left


def open_paths():
    """Every path some process holds open or mapped (to tell orphaned segments from live ones)."""
    held = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                try:
                    held.add(os.readlink(f"/proc/{d}/fd/{fd}"))
                except OSError:
                    pass
            with open(f"/proc/{d}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6:
                        held.add(parts[5].strip())
        except OSError:
            pass
    return held


def listing(d):
    try:
        return set(os.listdir(d))
    except OSError:
        return set()


def sysv_shm():
    """shmid -> creator pid of the System V segments."""
    out = {}
    try:
        txt = subprocess.run(["ipcs", "-m", "-p"], capture_output=True, text=True).stdout
    except OSError:
        return out
    for line in txt.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0].isdigit() and f[2].isdigit():
            out[int(f[0])] = int(f[2])
    return out


def check_rows(outdir):
    """Problems with the rows written: partial last lines, rows that do not parse."""
    bad = []
    for root, _, files in os.walk(outdir):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".tmp"):
                bad.append(f"temporary file left: {path}")
                continue
            if not (name.endswith(".csv") or name.endswith(".jsonl") or name.endswith(".json")):
                continue
            with open(path, "rb") as f:
                data = f.read()
            if name.endswith(".json"):
                try:
                    json.loads(data)
                except ValueError as e:
                    bad.append(f"{name}: does not parse: {e}")
                continue
            if data and not data.endswith(b"\n"):
                bad.append(f"{name}: partial last line {data.splitlines()[-1][:60]!r}")
            text = data.decode(errors="replace")
            if name.endswith(".jsonl"):
                for i, line in enumerate(text.splitlines()):
                    try:
                        json.loads(line)
                    except ValueError:
                        bad.append(f"{name}:{i + 1}: not JSON")
            else:
                rows = list(csv.reader(io.StringIO(text)))
                for i, row in enumerate(rows[1:], 2):
                    if len(row) != len(rows[0]):
                        bad.append(f"{name}:{i}: {len(row)} fields, the header has {len(rows[0])}")
    return bad


def kill_tree(launcher, token):
    for pid in [launcher] + job_processes(token) if token else [launcher]:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def run_case(binary, cmd, transport, fault, timeout_s, rng, tmp):
    args, n = COMMANDS[cmd]
    argv = [binary] + args + ["-n", str(n), "--transport", transport, "--timeout", str(timeout_s)]
    if cmd == "allreduce":
        argv += ["--algo", ALGOS[transport]]
    emulate = fault == "linkdown"
    if emulate:
        argv += ["--emulate", EMU_RATE]
    outdir = os.path.join(tmp, f"{cmd}-{transport}-{fault}")
    argv += ["--out", outdir]
    victim = rng.randrange(n)
    delay = rng.uniform(0.2, 2.5)
    shm_before, tmp_before = listing("/dev/shm"), listing(tempfile.gettempdir())
    sess_before = mpi_sessions()
    sysv_before = set(sysv_shm())
    errpath = os.path.join(tmp, "stderr.txt")
    with open(errpath, "wb") as err, open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, stdout=null, stderr=err, env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                                                     OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    problems, token, ranks, pids, tree, mpi_job = [], None, None, set(), set(), None
    start = time.monotonic()
    while ranks is None and p.poll() is None and time.monotonic() - start < 30:
        ranks = find_ranks(p.pid, binary, n)
        time.sleep(0.02)
    fault_at = None
    if ranks is None:
        problems.append("the ranks never all started" if p.poll() is None else f"exited ({p.returncode}) before the fault")
    else:
        env0 = environ(ranks[0])
        token = env0.get("FABENCH_TOKEN")
        # Open MPI names its shared-memory segments after the job id, in hex
        # (vader_segment.<host>.<...>.<jobid>.<local rank>)
        jobid = env0.get("OMPI_MCA_ess_base_jobid", "")
        if jobid.isdigit():
            mpi_job = format(int(jobid), "x")
        pids = set(ranks.values())
        time.sleep(delay)
        tree = set(descendants(p.pid, procs()))  # mpirun and its helpers too
        fault_at = time.monotonic()
        if p.poll() is not None:
            problems.append(f"finished ({p.returncode}) before the fault at {delay:.2f} s: make the run longer")
        elif fault == "kill":
            os.kill(ranks[victim], signal.SIGKILL)
        elif fault == "stop":
            os.kill(ranks[victim], signal.SIGSTOP)
        else:
            ns, dev = f"fb{p.pid}n{victim}", f"fb{p.pid}e{victim}"
            r = subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"could not take {dev} down in {ns}: {r.stderr.strip()}")
    limit = timeout_s + GRACE_S
    try:
        rc = p.wait(timeout=(limit + 30) if fault_at else 60)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - fault_at if fault_at else None
    if rc is None:
        problems.append(f"still running {limit + 30:.0f} s after the fault: killed")
        kill_tree(p.pid, token)
        p.wait()
    elif fault_at is not None and not problems:
        if took > limit:
            problems.append(f"ended {took:.1f} s after the fault (limit {limit:.0f} s)")
        if rc == 0:
            problems.append("exit status 0")
    with open(errpath, errors="replace") as f:
        stderr = f.read()
    named = set(int(m) for m in re.findall(r"rank (\d+) \(%s[,)]" % re.escape(HOST), stderr))
    named |= set(int(m) for m in re.findall(r"process rank (\d+) with PID \d+ on node %s" % re.escape(HOST), stderr))
    # Open MPI aborting inside MPI_Init (a link cut while it starts: no fabench code runs yet)
    # names the rank as a process name, and the launcher names the host mpirun ran on
    if re.search(r"fabench: mpirun \(pid \d+\) on %s exited" % re.escape(HOST), stderr):
        named |= set(int(m) for m in re.findall(r"Process name: \[\[\d+,\d+\],(\d+)\]", stderr))
    crash = re.search(r"stack smashing|Segmentation fault|AddressSanitizer|runtime error:|double free", stderr)
    if crash:
        problems.append(f"a process crashed: {crash.group(0)}")
    if fault_at is not None and not problems:
        if not named:
            problems.append("no error names a rank and this host")
        elif fault == "kill" and victim not in named:
            problems.append(f"the killed rank {victim} is not named (named: {sorted(named)})")
        # the launcher's own line (mpirun's can go missing): when it names a first rank to
        # end, that must be the one killed
        first = re.findall(r"rank (\d+) \(%s\): pid \d+ was the first rank here to end" % re.escape(HOST), stderr)
        if fault == "kill" and first and int(first[0]) != victim:
            problems.append(f"the launcher names rank {first[0]} as the first to end, not the killed {victim}")
    # what is left behind
    time.sleep(0.3)
    if token:
        left = job_processes(token)
        if left:
            problems.append(f"processes left: {left}")
            kill_tree(p.pid, token)
    for pid in pids:
        if os.path.exists(f"/proc/{pid}"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                state = "?"
            if state != "Z":
                problems.append(f"rank process {pid} left ({state})")
                os.kill(pid, signal.SIGKILL)
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    stale = [l.split()[0] for l in ns.splitlines() if l.startswith(f"fb{p.pid}n")]
    if stale:
        problems.append(f"network namespaces left: {stale}")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    if re.search(r"\bfb%d[a-z]" % p.pid, links):
        problems.append("emulated links left in the root namespace")
    held = open_paths()
    ours = pids | tree | {p.pid}
    # fabench itself makes no segments; its libraries name theirs after the process (libomp:
    # __KMP_REGISTERED_LIB_<pid>_<uid>) or the MPI job. Only a segment named after one of the
    # job's processes, its token or MPI job id is the job's: another test's, made meanwhile
    # (ctest -j), is not blamed.
    marks = {str(x) for x in ours} | {m for m in (token, mpi_job) if m}
    orphans = [s for s in listing("/dev/shm") - shm_before if f"/dev/shm/{s}" not in held
               and marks & set(re.split(r"[^0-9A-Za-z]+", s))]
    if orphans:
        problems.append(f"shared memory left: {sorted(orphans)}")
        for s in orphans:
            try:
                os.unlink(f"/dev/shm/{s}")
            except OSError:
                pass
    sysv = [k for k, cpid in sysv_shm().items() if k not in sysv_before and cpid in ours]
    if sysv:
        problems.append(f"System V shared memory left: {sysv}")
    tmpdir = tempfile.gettempdir()
    for name in listing(tmpdir) - tmp_before:
        path = os.path.join(tmpdir, name)
        if any(str(x) in name for x in ours) and path not in held:
            problems.append(f"temporary file left: {path}")
    # only new ones: pids wrap (pid_max 32768 here), so an old run's pid.N can share a pid of ours
    for path in mpi_sessions() - sess_before:
        if any(os.path.basename(path) == f"pid.{x}" for x in ours):
            problems.append(f"MPI session directory left: {path}")
    problems += check_rows(outdir)
    return dict(victim=victim, delay=delay, rc=rc, took=took, named=sorted(named), problems=problems,
                stderr=stderr)


def mpi_sessions():
    """Open MPI's per-process session directories: <tmp>/ompi.*/pid.N and prte.*/pid.N."""
    tmpdir = tempfile.gettempdir()
    return {os.path.join(tmpdir, s, name) for s in listing(tmpdir) if s.startswith(("ompi.", "prte."))
            for name in listing(os.path.join(tmpdir, s))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fabench")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FAULT_SEED", time.time_ns() % 100000)))
    ap.add_argument("--timeout", type=int, default=3, help="the command's --timeout (s)")
    a = ap.parse_args()
    binary = os.path.realpath(a.fabench)
    rng = random.Random(a.seed)
    can_emulate = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
    print(f"fault matrix: seed {a.seed} (FAULT_SEED={a.seed} repeats it), timeout {a.timeout} s, host {HOST}")
    failed = 0
    tmp = tempfile.mkdtemp(prefix="fabench-faults.")
    try:
        for cmd in COMMANDS:
            for tr in TRANSPORTS:
                for fault in FAULTS:
                    name = f"{cmd}/{tr}/{fault}"
                    if a.only and a.only not in name:
                        continue
                    if fault == "linkdown" and not can_emulate:
                        print(f"{name:28s} skipped: emulated fabrics need root, ip and tc")
                        continue
                    if tr == "mpi" and not shutil.which("mpirun"):
                        print(f"{name:28s} skipped: no mpirun")
                        continue
                    r = run_case(binary, cmd, tr, fault, a.timeout, rng, tmp)
                    took = f"{r['took']:.1f}s" if r["took"] is not None else "-"
                    verdict = "ok" if not r["problems"] else "FAILED"
                    print(f"{name:28s} {verdict:6s} victim rank {r['victim']} at {r['delay']:.2f}s, "
                          f"exit {r['rc']} after {took}, named {r['named']}")
                    if r["problems"]:
                        failed += 1
                        for pr in r["problems"]:
                            print(f"    {pr}")
                        print("    stderr: " + "\n    stderr: ".join(r["stderr"].strip().splitlines()[-30:]))
                    sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"fault matrix: {failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
