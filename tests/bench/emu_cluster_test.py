#!/usr/bin/env python3
"""Launchers across emulated hosts: fabench started the way a cluster starts it, not by fabench.

scripts/emu-cluster.sh makes the hosts (node0, node1, ...: one network namespace each on a
shaped bridge, a hostname and IPC namespace of their own); each test then launches fabench
across them as an outside launcher would:

    script    emu-cluster.sh itself: up, exec, the rsh agent, down, a failed and an
              interrupted up, a stale set (nothing may be left in any case)
    torchrun  a per-node script (tests/bench/emu_node_ranks.sh, what torchrun's agent or an
              operator does) gives each rank RANK, WORLD_SIZE, LOCAL_RANK, ... MASTER_ADDR;
              fabench allreduce over tcp (and ucx), then fabench train, on 2 nodes x 2 ranks
    mpirun    one Open MPI mpirun over a hostfile of node0 and node1, its daemons started on
              the nodes by scripts/emu-cluster-rsh.sh: 2+2 and 3+1 ranks, MPI bootstrap; and
              more ranks than slots, and a host that is no node (mpirun's own errors)
    errors    a world of 4 with rank 3 never started, and MASTER_ADDR an address no node has:
              every rank ends within --timeout with one line naming itself and its host

    emu_cluster_test.py FABENCH TEST

Needs root, iproute2, util-linux (unshare, nsenter); mpirun for the mpirun test; exits 77
(ctest's skip) with one line saying why otherwise. The set's id is this process's pid, so a
test killed outright leaves a stale set that the next `emu-cluster.sh up` or fabench
--emulate run removes; otherwise every process it started (found by a marker in their
environment), the set's namespaces, links, holders and state dir are removed on any exit and
checked to be gone.
"""
import csv, json, os, re, shutil, signal, subprocess, sys, tempfile, time, uuid

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
EMU = os.path.join(SRC, "scripts", "emu-cluster.sh")
RSH = os.path.join(SRC, "scripts", "emu-cluster-rsh.sh")
NODE = os.path.join(HERE, "emu_node_ranks.sh")
RATE = "1gbit"
PORT = 29500  # node0's namespace is ours alone: any port is free there
MARK = "EMU_CLUSTER_TEST_MARK"  # in the environment of everything this test starts
TOKEN = uuid.uuid4().hex


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def log(msg):
    print(msg, flush=True)


def env(**extra):
    e = dict(os.environ)
    e[MARK] = TOKEN
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # Nodes share one kernel and one PID namespace: UCX's cross-memory attach would pass
    # between them, bypassing the links (fabench --emulate makes the same choice).
    e["UCX_TLS"] = "self,sysv,posix,tcp"
    e.update({k: str(v) for k, v in extra.items()})
    return e


def marked_pids():
    """Processes with this run's marker in their environment (not this one)."""
    needle = f"{MARK}={TOKEN}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            pass
    return out


def kill_marked():
    for _ in range(20):
        pids = marked_pids()
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def run(argv, timeout=30, merge=True, **kw):
    """Runs argv to its end (stderr into stdout where merge); the result, or Fail after timeout."""
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                              timeout=timeout, env=kw.pop("env", env()), start_new_session=True, **kw)
    except subprocess.TimeoutExpired:
        raise Fail(f"{' '.join(argv[:4])} ... did not end within {timeout} s")


def names_of(set_id):
    """What of set set_id still exists: namespaces, links, state dir, holders."""
    left = []
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    left += [l.split()[0] for l in ns.splitlines() if re.match(rf"fb{set_id}n\d+\b", l)]
    links = subprocess.run(["ip", "-o", "link", "show"], stdout=subprocess.PIPE, text=True).stdout
    for l in links.splitlines():
        name = l.split(": ")[1].split("@")[0]
        if re.fullmatch(rf"fb{set_id}(h\d+|br)", name):
            left.append(name)
    if os.path.exists(f"/run/fabench-emu/{set_id}"):
        left.append(f"/run/fabench-emu/{set_id}")
    return left


class Cluster:
    """An emulated cluster of `nodes` hosts for one `with` block, owned by this process."""

    def __init__(self, nodes):
        self.nodes, self.id, self.addr = nodes, os.getpid(), []

    def __enter__(self):
        r = run([EMU, "up", str(self.nodes), RATE, str(self.id)], merge=False)
        if r.returncode != 0:
            raise Fail(f"emu-cluster.sh up failed ({r.returncode}): {r.stderr.strip()}")
        lines = r.stdout.splitlines()
        m = re.match(r"set (\d+) subnet (\S+) ", lines[0])
        check(m and int(m.group(1)) == self.id, f"unexpected first line of up: {lines[0]!r}")
        self.subnet = m.group(2)
        for k in range(self.nodes):
            f = lines[k + 1].split()
            check(f[0] == f"node{k}", f"unexpected node line: {lines[k + 1]!r}")
            self.addr.append(f[1])
        self.prefix = self.addr[0].rsplit(".", 1)[0] + "."
        return self

    def exec_argv(self, k, *argv):
        return [EMU, "exec", str(self.id), str(k), *argv]

    def __exit__(self, *exc):
        kill_marked()
        run([EMU, "down", str(self.id)])
        left = names_of(self.id)
        if left and exc[0] is None:
            raise Fail(f"left after down: {left}")
        return False


def read_run(out_dir):
    with open(os.path.join(out_dir, "run.json")) as f:
        return json.load(f)


def check_layout(rj, hosts, boot):
    check(rj.get("status") == "ok", f"run.json status {rj.get('status')!r}")
    check(rj.get("ranks") == len(hosts), f"ranks {rj.get('ranks')}, want {len(hosts)}")
    check(rj.get("host_count") == len(set(hosts)), f"host_count {rj.get('host_count')}")
    check(rj.get("rank_hosts") == hosts, f"rank_hosts {rj.get('rank_hosts')}, want {hosts}")
    check(rj.get("bootstrap") == boot, f"bootstrap {rj.get('bootstrap')!r}, want {boot!r}")


def check_rows(out_dir, pairs, boot):
    """allreduce.csv has verified rows (errors 0) for every transport/algo pair."""
    with open(os.path.join(out_dir, "allreduce.csv")) as f:
        rows = list(csv.DictReader(f))
    check(rows, "allreduce.csv has no rows")
    seen = set()
    for r in rows:
        check(r["errors"] == "0", f"row {r['transport']}/{r['algo']} {r['bytes']} B: errors {r['errors']}")
        check(r["host_count"] == "2" and r["boot"] == boot, f"row says host_count {r['host_count']} boot {r['boot']}")
        seen.add((r["transport"], r["algo"]))
    check(set(pairs) <= seen, f"rows for {sorted(seen)}, want {sorted(pairs)}")


def check_intra(run_json, transport, fabench):
    """hier's phases inside nodes went over ucx, whose ranks on a node mapped each other's
    buffer (the default where ucx is built): run.json's fabrics say so."""
    if not have_feature(fabench, "UCX"):
        return
    f = run_json.get("fabrics", {}).get(f"{transport}/intra", "")
    check(f.startswith("ucx:") and "+rkey_ptr" in f,
          f"{transport}'s hier inside nodes ran over '{f}', want ucx with mapped memory (+rkey_ptr)")


def have_feature(fabench, name):
    v = os.environ.get(f"EMU_HAVE_{name}")
    if v is not None:
        return v.upper() in ("1", "ON", "TRUE", "YES")
    if name == "UCX":  # probe: a one-rank run over ucx
        d = tempfile.mkdtemp(prefix="emu-probe-")
        try:
            r = run([fabench, "allreduce", "--transport", "ucx", "--min-bytes", "8", "--max-bytes", "8",
                     "--out", d])
            return r.returncode == 0
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return True


# ---- torchrun-style launches ------------------------------------------------------------------

def torchrun(c, argv, per_node=2, timeout=90, skip=(), master=None):
    """Each node's launcher script started at once; returns [(rc, output, seconds)] per node."""
    world = c.nodes * per_node
    master = master or c.addr[0]
    e = env(EMU_SKIP_RANKS=" ".join(map(str, skip)))
    t0 = time.monotonic()
    ps = [subprocess.Popen(c.exec_argv(k, NODE, str(k), str(per_node), str(world), master, str(PORT), *argv),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                           start_new_session=True) for k in range(c.nodes)]
    res = []
    for k, p in enumerate(ps):
        try:
            out, _ = p.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            raise Fail(f"node {k}'s ranks did not end within {timeout} s")
        res.append((p.returncode, out, time.monotonic() - t0))
    return res


def test_torchrun(fabench, tmp):
    transports = ["tcp"] + (["ucx"] if have_feature(fabench, "UCX") else [])
    if len(transports) == 1:
        log("ucx: not built, tcp only")
    with Cluster(2) as c:
        out = os.path.join(tmp, "allreduce")
        res = torchrun(c, [fabench, "allreduce", "--transport", ",".join(transports), "--algo", "ring,hier",
                           "--min-bytes", "1M", "--max-bytes", "2M", "--iters", "10", "--warmup", "2",
                           "--rounds", "1", "--timeout", "20", "--out", out])
        for k, (rc, text, _) in enumerate(res):
            check(rc == 0, f"node {k}'s ranks exited {rc}:\n{text}")
        check_layout(read_run(out), ["node0", "node0", "node1", "node1"], "env")
        check_rows(out, [(t, a) for t in transports for a in ("ring", "hier:ring")], "env")
        check_intra(read_run(out), "tcp", fabench)
        log(f"allreduce {','.join(transports)} on 2x2 via RANK/WORLD_SIZE/MASTER_ADDR: ok ({res[0][2]:.1f} s)")

        if not have_feature(fabench, "DNNL"):
            log("train: not built (no oneDNN), skipped")
            return
        out = os.path.join(tmp, "train")
        res = torchrun(c, [fabench, "train", "--transport", "tcp", "--model", "resnet8-w4",
                           "--data", "synthetic:1x8x8:10:256", "--batch", "8", "--steps", "6",
                           "--warmup-steps", "2", "--threads", "1", "--eval-every", "0",
                           "--no-single", "--timeout", "20", "--out", out])
        for k, (rc, text, _) in enumerate(res):
            check(rc == 0, f"train: node {k}'s ranks exited {rc}:\n{text}")
        rj = read_run(out)
        check_layout(rj, ["node0", "node0", "node1", "node1"], "env")
        done = [r for r in rj.get("results", []) if r.get("status") == "done" and r.get("transport") == "tcp"]
        check(done, f"train: no finished tcp result in run.json: {rj.get('results')}")
        log(f"train tcp on 2x2 via RANK/WORLD_SIZE/MASTER_ADDR: ok ({res[0][2]:.1f} s)")


# ---- error cases ------------------------------------------------------------------------------

def rank_lines(outputs):
    """rank -> the lines it printed (emu_node_ranks.sh prefixes them with "[rank R] ")."""
    lines = {}
    for text in outputs:
        for l in text.splitlines():
            m = re.match(r"\[rank (\d+)\] (.*)", l)
            if m:
                lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def test_errors(fabench, tmp):
    timeout_s = 5
    argv = [fabench, "allreduce", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1M",
            "--max-bytes", "1M", "--timeout", str(timeout_s), "--out", os.path.join(tmp, "err")]
    bound = timeout_s + 2 + 6  # the timeout, the verdict's grace, and the start of 4 processes
    host = {0: "node0", 1: "node0", 2: "node1", 3: "node1"}
    with Cluster(2) as c:
        # A world of 4 of which rank 3 never starts.
        res = torchrun(c, argv, skip=(3,), timeout=bound + 20)
        took = max(t for _, _, t in res)
        check(all(rc != 0 for rc, _, _ in res), f"missing rank: exit statuses {[rc for rc, _, _ in res]}")
        check(took <= bound, f"missing rank: the ranks took {took:.1f} s, more than {bound} s")
        lines = rank_lines(t for _, t, _ in res)
        check(sorted(lines) == [0, 1, 2], f"missing rank: output from ranks {sorted(lines)}")
        for r, ls in lines.items():
            check(len(ls) == 1, f"missing rank: rank {r} printed {len(ls)} lines: {ls}")
            check(f"rank {r} ({host[r]})" in ls[0], f"missing rank: rank {r}'s error names no rank and host: {ls[0]}")
            check(re.search(r"missing.*\b3\b|\b3 missing", ls[0]), f"missing rank: rank {r} does not name rank 3: {ls[0]}")
        log(f"WORLD_SIZE=4 with 3 ranks: every rank failed in {took:.1f} s naming rank 3:")
        for r in sorted(lines):
            log(f"  rank {r}: {lines[r][0]}")

        # MASTER_ADDR an address of the set's subnet that no node has.
        bad = c.prefix + "200"
        res = torchrun(c, argv, master=bad, timeout=bound + 20)
        took = max(t for _, _, t in res)
        check(all(rc != 0 for rc, _, _ in res), f"bad MASTER_ADDR: exit statuses {[rc for rc, _, _ in res]}")
        check(took <= bound, f"bad MASTER_ADDR: the ranks took {took:.1f} s, more than {bound} s")
        lines = rank_lines(t for _, t, _ in res)
        check(sorted(lines) == [0, 1, 2, 3], f"bad MASTER_ADDR: output from ranks {sorted(lines)}")
        for r, ls in lines.items():
            check(len(ls) == 1, f"bad MASTER_ADDR: rank {r} printed {len(ls)} lines: {ls}")
            check(f"rank {r} ({host[r]})" in ls[0], f"bad MASTER_ADDR: rank {r}'s error names no rank and host: {ls[0]}")
            if r:
                check(f"{bad}:{PORT}" in ls[0], f"bad MASTER_ADDR: rank {r} does not name {bad}:{PORT}: {ls[0]}")
        log(f"MASTER_ADDR={bad}: every rank failed in {took:.1f} s:")
        for r in sorted(lines):
            log(f"  rank {r}: {lines[r][0]}")
        if bad not in lines[0][0]:
            log(f"  note: rank 0 does not say that MASTER_ADDR {bad} is none of its addresses")


# ---- mpirun -----------------------------------------------------------------------------------

def mpirun_argv(c, hostfile, np, tmp, *extra):
    # if_base_do_not_resolve: Open MPI would otherwise look node0 and node1 up (DNS, past
    # /etc/hosts) to learn whether either is this host; unresolved they count as remote anyway.
    # The daemons and ranks reach mpirun and each other only over the set's subnet. Session
    # directories go under the test's directory, so a killed job's go with it.
    return ["mpirun", "--hostfile", hostfile, "-np", str(np),
            "--mca", "if_base_do_not_resolve", "1", "--mca", "orte_tmpdir_base", tmp,
            "--mca", "plm_rsh_agent", RSH, "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", c.subnet, "--mca", "btl_tcp_if_include", c.subnet,
            "--mca", "btl", "tcp,self,vader", "-x", "PMIX_MCA_ptl_tcp_if_include", "-x", "UCX_TLS",
            *extra]


def only_holders_left(c, grace=5.0):
    """Nothing but the holders runs in the nodes' namespaces (no orted, no rank) within `grace`
    seconds of mpirun's exit: a node's daemon may still be on its way out when mpirun returns
    (seen where mpirun could not start another node's)."""
    deadline = time.monotonic() + grace
    for k in range(c.nodes):
        with open(f"/run/fabench-emu/{c.id}/holder.{k}") as f:
            holder = f.read().strip()
        while True:
            pids = subprocess.run(["ip", "netns", "pids", f"fb{c.id}n{k}"], stdout=subprocess.PIPE,
                                  text=True).stdout.split()
            extra = [p for p in pids if p != holder]
            if not extra or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        check(not extra, f"node {k}: processes left {grace:.0f} s after mpirun: {extra}")


def test_mpirun(fabench, tmp):
    with Cluster(2) as c:
        e = env(EMU_CLUSTER_ID=c.id, PMIX_MCA_ptl_tcp_if_include=c.subnet)
        if e.get("ASAN_OPTIONS"):
            # sanitizer builds: Open MPI's components are unloaded before LeakSanitizer reports
            # what they keep; the slow unwinder's whole stacks reach the libraries
            # tests/lsan.supp names
            e["ASAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
        for slots, np in (((2, 2), 4), ((3, 1), 4)):
            hf = os.path.join(tmp, f"hosts{slots[0]}{slots[1]}")
            with open(hf, "w") as f:
                f.write(f"node0 slots={slots[0]}\nnode1 slots={slots[1]}\n")
            out = os.path.join(tmp, f"mpi{slots[0]}{slots[1]}")
            t0 = time.monotonic()
            r = run(mpirun_argv(c, hf, np, tmp, fabench, "allreduce", "--transport", "mpi", "--algo", "native,ring,hier",
                                "--min-bytes", "1M", "--max-bytes", "1M", "--iters", "10", "--warmup", "2",
                                "--rounds", "1", "--timeout", "20", "--out", out),
                    timeout=120, env=e)
            check(r.returncode == 0, f"mpirun {slots}: exit {r.returncode}:\n{r.stdout}")
            hosts = ["node0"] * slots[0] + ["node1"] * slots[1]
            check_layout(read_run(out), hosts, "mpi")
            check_rows(out, [("mpi", "native"), ("mpi", "ring"), ("mpi", "hier:ring")], "mpi")
            check_intra(read_run(out), "mpi", fabench)
            only_holders_left(c)
            log(f"mpirun node0 slots={slots[0]} node1 slots={slots[1]}: ok, ranks on {hosts} "
                f"({time.monotonic() - t0:.1f} s)")

        # More ranks than slots, no --oversubscribe: mpirun refuses, and ends.
        hf = os.path.join(tmp, "hosts22")
        t0 = time.monotonic()
        r = run(mpirun_argv(c, hf, 5, tmp, fabench, "allreduce", "--transport", "mpi", "--timeout", "10",
                            "--out", os.path.join(tmp, "mpi5")), timeout=60, env=e)
        check(r.returncode != 0, f"mpirun -np 5 on 4 slots exited 0:\n{r.stdout}")
        check("not enough slots" in r.stdout, f"mpirun -np 5 on 4 slots: unexpected output:\n{r.stdout}")
        only_holders_left(c)
        log(f"mpirun -np 5 on 4 slots: exit {r.returncode} in {time.monotonic() - t0:.1f} s "
            "(\"There are not enough slots available in the system ...\")")

        # A hostfile host that is no node of the set: the agent says so, mpirun gives up.
        hf = os.path.join(tmp, "hosts-node2")
        with open(hf, "w") as f:
            f.write("node0 slots=2\nnode2 slots=2\n")
        t0 = time.monotonic()
        r = run(mpirun_argv(c, hf, 4, tmp, fabench, "allreduce", "--transport", "mpi", "--timeout", "10",
                            "--out", os.path.join(tmp, "mpi-node2")), timeout=60, env=e)
        check(r.returncode != 0 and "not '2'" in r.stdout and "unable to reliably start" in r.stdout,
              f"mpirun with node2 in the hostfile: exit {r.returncode}:\n{r.stdout}")
        only_holders_left(c)
        log(f"mpirun with node2 (no such node) in the hostfile: exit {r.returncode} in "
            f"{time.monotonic() - t0:.1f} s (\"ORTE was unable to reliably start one or more daemons\")")


# ---- emu-cluster.sh itself --------------------------------------------------------------------

def owners():
    out = set()
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f.read().startswith(b"fabench-emu-owner"):
                    out.add(int(d))
        except (OSError, ValueError):
            pass
    return out


def test_script(fabench, tmp):
    with Cluster(2) as c:
        ipc = []
        for k in range(2):
            r = run(c.exec_argv(k, "sh", "-c", "hostname; readlink /proc/self/ns/ipc; ip -o -4 addr show; "
                                               "echo $EMU_NODE $EMU_NODE_ADDR"))
            lines = r.stdout.splitlines()
            check(r.returncode == 0 and lines[0] == f"node{k}", f"exec on node {k}: {r.stdout}")
            check(f"inet {c.addr[k]}/24" in r.stdout and lines[-1] == f"{k} {c.addr[k]}",
                  f"exec on node {k}: not node {k}'s network: {r.stdout}")
            ipc.append(lines[1])
            again = run(c.exec_argv(k, "readlink", "/proc/self/ns/ipc")).stdout.strip()
            check(again == ipc[k], f"node {k}: two execs in different IPC namespaces")
        check(ipc[0] != ipc[1] and ipc[0] != os.readlink("/proc/self/ns/ipc"), f"IPC namespaces {ipc}")
        # node1 reaches node0 over the bridge
        srv = subprocess.Popen(c.exec_argv(0, sys.executable, "-c",
                                           "import socket; s = socket.socket(); s.bind(('', 5555)); s.listen(); "
                                           "print(s.accept()[0].recv(16).decode(), flush=True)"),
                               stdout=subprocess.PIPE, text=True, env=env(), start_new_session=True)
        for _ in range(100):
            r = run(c.exec_argv(1, "bash", "-c", f"echo hello > /dev/tcp/{c.addr[0]}/5555"))
            if r.returncode == 0:
                break
            time.sleep(0.05)
        check(r.returncode == 0, f"node1 cannot reach node0: {r.stdout}")
        check(srv.communicate(timeout=10)[0].strip() == "hello", "node0 did not receive node1's message")
        # the rsh agent, as mpirun calls it
        e = env(EMU_CLUSTER_ID=c.id)
        for host, k in (("node1", 1), (c.addr[0], 0)):
            r = run([RSH, "-x", host, "echo", "$(hostname)"], env=e)
            check(r.returncode == 0 and r.stdout.strip() == f"node{k}", f"rsh {host}: {r.returncode} {r.stdout}")
        r = run([RSH, "node7", "true"], env=e)
        check(r.returncode == 255, f"rsh to a node the set lacks: exit {r.returncode}")
        log("up, exec (hostname, IPC namespace, address), node1 -> node0 over the bridge, rsh agent: ok")

    # A failed up (node 1's holder) and an interrupted one leave nothing; the owner `up`
    # starts itself goes with the set.
    before = owners()
    r = run([EMU, "up", "3", RATE], env=env(EMU_CLUSTER_FAIL_NODE=1))
    check(r.returncode != 0, "up with a failing holder succeeded")
    check(owners() == before, f"owner process left after a failed up: {owners() - before}")
    check(not marked_pids(), f"processes left after a failed up: {marked_pids()}")
    r = run([EMU, "up", "2", RATE, str(os.getpid())], env=env(EMU_CLUSTER_FAIL_NODE=1))
    check(r.returncode != 0 and not names_of(os.getpid()), f"failed up left {names_of(os.getpid())}")
    p = subprocess.Popen([EMU, "up", "3", RATE, str(os.getpid())], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env(EMU_CLUSTER_FAIL_NODE=2, EMU_CLUSTER_FAIL_MODE="stall"),
                         start_new_session=True)
    for _ in range(200):
        if os.path.exists(f"/run/fabench-emu/{os.getpid()}/holder.1"):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    check(len(names_of(os.getpid())) > 3, "the interrupted up had not made its set")
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=20)
    check(p.returncode == 143, f"interrupted up exited {p.returncode}")
    check(not names_of(os.getpid()), f"interrupted up left {names_of(os.getpid())}")
    check(not marked_pids(), f"processes left after an interrupted up: {marked_pids()}")
    log("a failed up (default owner, given owner) and a SIGTERMed one: nothing left")

    # up without an owner starts one; down ends it. A set whose owner died is stale: the next
    # up removes it.
    r = run([EMU, "up", "1", RATE], merge=False)
    check(r.returncode == 0, f"up without ID: {r.stderr}")
    sid = int(r.stdout.split()[1])
    check(sid in owners(), f"set {sid}: no owner process")
    run([EMU, "down", str(sid)])
    check(sid not in owners() and not names_of(sid), f"down {sid} left {names_of(sid)} or its owner")
    owner = subprocess.Popen(["sleep", "60"], env=env(), start_new_session=True)
    r = run([EMU, "up", "1", RATE, str(owner.pid)])
    check(r.returncode == 0, f"up with ID {owner.pid}: {r.stdout}")
    owner.kill()
    owner.wait()
    check("stale" in run([EMU, "list"]).stdout, "list does not call a set without owner stale")
    with Cluster(1):
        check(not names_of(owner.pid), f"up did not remove stale set {owner.pid}: {names_of(owner.pid)}")
    log("owner started by up ends with down; a set whose owner died is removed by the next up: ok")


TESTS = {"script": test_script, "torchrun": test_torchrun, "mpirun": test_mpirun, "errors": test_errors}


def prerequisites(test):
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "unshare", "nsenter", "setsid", "flock"):
        if not shutil.which(tool):
            return f"needs {tool} (iproute2, util-linux)"
    if test == "mpirun":
        if not shutil.which("mpirun"):
            return "no mpirun"
        v = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if "Open MPI" not in v.stdout:
            return "mpirun is not Open MPI's"
        if not have_feature(None, "MPI"):
            return "fabench built without MPI"
    return None


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in TESTS:
        print(f"usage: emu_cluster_test.py FABENCH {'|'.join(TESTS)}", file=sys.stderr)
        return 2
    fabench, test = os.path.abspath(sys.argv[1]), sys.argv[2]
    why = prerequisites(test)
    if why:
        print(f"SKIP: emu_cluster {test}: {why}")
        return SKIP
    # a signal ends the test through the same clean-up as a failure
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda sig, _: sys.exit(128 + sig))
    tmp = tempfile.mkdtemp(prefix=f"emu-cluster-{test}-")
    t0 = time.monotonic()
    try:
        TESTS[test](fabench, tmp)
    except Fail as e:
        print(f"FAIL: emu_cluster {test}: {e}", flush=True)
        return 1
    finally:
        kill_marked()
        if names_of(os.getpid()):
            subprocess.run([EMU, "down", str(os.getpid())])
        shutil.rmtree(tmp, ignore_errors=True)
    left = names_of(os.getpid()) + [str(p) for p in marked_pids()]
    if left:
        print(f"FAIL: emu_cluster {test}: left behind: {left}")
        return 1
    log(f"PASS: emu_cluster {test} ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
