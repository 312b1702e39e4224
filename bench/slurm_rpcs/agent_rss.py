#!/usr/bin/env python3
"""bench/slurm_rpcs/agent_rss.py BUILD_DIR [N...] - the whole agent's memory per tracked Slurm job (issue 17).

Run through bench/slurm_rpcs/agent_rss.sh (as the lab user, on a running lab). For each N (default 1000):
starts a nymph-control and a `nymph run` whose slurm runner takes N jobs (process runner off), measures the
agent's RSS once it is serving with nothing to do (the baseline of the same run), submits N same-shaped
`sleep 3600` jobs to the control plane (the agent submits them as job arrays; most stay pending on the lab's
few CPUs), waits until Slurm holds all N, then samples the agent's VmRSS every 0.5 s for NYMPH_BENCH_HOLD_S (30) s
of tracking (poll cycles, lease renewals through polls) and prints, per tracked job, (RSS - baseline) / N
between cycles (the lowest sample) and at the peak (the highest). Everything the bench submitted is scancelled
(by id: jobs whose working directory is the bench's own) and every process it started is stopped at the end.
This is the agent's figure, beside the runner-only one of nymph-bench-slurm-rpcs: each attempt also holds the
agent's own per-attempt state (its spec, outbox, delivery coroutine, reporter).
"""
import http.client, json, os, signal, subprocess, sys, tempfile, threading, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release")
sizes = [int(n) for n in sys.argv[2:]] or [1000]
NYMPH = f"{build}/agent/nymph"
CONTROL = f"{build}/control/nymph-control"
HOLD_S = float(os.environ.get("NYMPH_BENCH_HOLD_S", "30"))
# A command prefix for the agent, e.g. "valgrind --tool=massif" to see where its heap goes (RSS is then the tool's).
WRAPPER = os.environ.get("NYMPH_BENCH_AGENT_WRAPPER", "").split()
JOBS_DIR = os.environ["SLURM_LAB_JOBS_DIR"]


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_s(pid):
    """User + system CPU seconds `pid` has used so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Api:
    """Admin requests on one kept-alive connection."""

    def __init__(self, url, token):
        host, port = url.split("//")[1].split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        self.token = token

    def __call__(self, method, path, body=None):
        self.conn.request(method, path, body=None if body is None else json.dumps(body),
                          headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data!r}")
        return json.loads(data or b"{}")


def poll_requests(url):
    """nymph-control's polls answered so far (its /metrics counter nymph_poll_requests_total)."""
    host, port = url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    return next((int(l.split()[1]) for l in body.splitlines() if l.startswith("nymph_poll_requests_total ")), 0)


def connections_to(port):
    """Established TCP connections whose remote end is 127.0.0.1:`port` (the agent's side of its connections to the
    control plane; the admin client's are counted too: one)."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        return sum(1 for line in f.readlines()[1:] if line.split()[2] == want and line.split()[3] == "01")


class ConnectionSampler(threading.Thread):
    """Samples connections_to(port) every 20 ms until stopped; `most` is the highest count seen."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.most, self.done = port, 0, threading.Event()

    def run(self):
        while not self.done.wait(0.02):
            self.most = max(self.most, connections_to(self.port))


def bench_jobs_in_slurm(tmp):
    """Slurm ids (array tasks expanded) of the jobs whose working directory is under `tmp`."""
    out = subprocess.run(["squeue", "-h", "-r", "-u", str(os.getuid()), "-o", "%i %Z"], check=True,
                         capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if len(line.split()) == 2 and line.split()[1].startswith(tmp)]


def wait_until(what, predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)


def measure(n):
    tmp = tempfile.mkdtemp(prefix="nymph-bench-rss-", dir=JOBS_DIR)
    os.chmod(tmp, 0o700)
    procs = []
    try:
        def token(role):
            return subprocess.run([CONTROL, "token", "create", "--db", f"{tmp}/cp.db", "--role", role], check=True,
                                  capture_output=True, text=True).stdout.strip()
        admin = token("admin")
        with open(f"{tmp}/token", "w") as f:
            f.write(token("agent"))
        os.chmod(f"{tmp}/token", 0o600)
        server = subprocess.Popen([CONTROL, "serve", "--listen", "127.0.0.1:0", "--db", f"{tmp}/cp.db"],
                                  stdout=subprocess.PIPE, stderr=open(f"{tmp}/server.log", "w"), text=True)
        procs.append(server)
        url = server.stdout.readline().split()[-1]
        with open(f"{tmp}/config.toml", "w") as f:
            f.write(f'[server]\nurl = "{url}"\ntoken_file = "token"\n'
                    '[worker]\nlabel = "bench-rss"\nmax_process_jobs = 0\n'
                    f'[runners.slurm]\nenabled = true\nmax_jobs = {n}\nlaunch_dir = "{tmp}/slurm"\n'
                    f'[manager]\nstate_dir = "manager"\ncluster = "{os.path.basename(tmp)}"\n'
                    '[log]\nlevel = "warn"\nfile = "agent.log"\n')
        agent = subprocess.Popen([*WRAPPER, NYMPH, "run", "--config", "config.toml"], cwd=tmp, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(agent)
        wait_until("the agent to serve", lambda: os.path.exists(f"{tmp}/status.json")
                   and '"serving"' in open(f"{tmp}/status.json").read(), 60)
        time.sleep(2)  # start-up settles: the baseline is the agent serving with nothing to do
        baseline = min(vm_rss_kib(agent.pid) for _ in range(4) if time.sleep(0.5) is None)

        api = Api(url, admin)
        sampler = ConnectionSampler(int(url.rsplit(":", 1)[1]))
        sampler.start()
        t0 = time.monotonic()
        agent_cpu0, server_cpu0 = cpu_s(agent.pid), cpu_s(server.pid)
        polls0 = poll_requests(url)
        for _ in range(n):
            api("POST", "/v1/jobs", {"runner": "slurm", "argv": ["/bin/sleep", "3600"]})
        submitted_s = time.monotonic() - t0
        wait_until(f"{n} jobs in Slurm", lambda: len(bench_jobs_in_slurm(tmp)) >= n, 600)
        in_slurm_s = time.monotonic() - t0
        agent_cpu, server_cpu = cpu_s(agent.pid) - agent_cpu0, cpu_s(server.pid) - server_cpu0
        polls = poll_requests(url) - polls0
        samples = []
        end = time.monotonic() + HOLD_S
        while time.monotonic() < end:
            samples.append(vm_rss_kib(agent.pid))
            time.sleep(0.5)
        low, high = min(samples), max(samples)
        sampler.done.set()
        sampler.join()
        print(f"N = {n}: agent RSS serving idle {baseline} KiB; tracking {n} Slurm jobs ({HOLD_S:.0f} s, "
              f"{len(samples)} samples) {low}-{high} KiB: per tracked job {(low - baseline) * 1024 / n:.0f} B "
              f"between cycles, {(high - baseline) * 1024 / n:.0f} B at the peak "
              f"(submitted to the control plane in {submitted_s:.1f} s, all in Slurm after {in_slurm_s:.1f} s; CPU "
              f"meanwhile: agent {agent_cpu:.1f} s, control plane {server_cpu:.1f} s; polls meanwhile {polls}); "
              f"most connections to the control plane at once {sampler.most} (sampled every 20 ms)",
              flush=True)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        ids = bench_jobs_in_slurm(tmp)
        for i in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[i:i + 500]], check=False)
        subprocess.run(["rm", "-rf", tmp], check=False)


print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
for n in sizes:
    measure(n)
print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
