#!/usr/bin/env python3
"""bench/agent/run.py BUILD_DIR - the agent's figures (issue 4), against a real nymph-control on loopback.

Prints, for an uninstrumented build (cmake --preset release && cmake --build --preset release):
  idle agent: RSS, CPU milliseconds per minute, wake-ups (context switches) per second
  /bin/true jobs: submit -> done p50/p99 and jobs/s with 2 in flight, next to this machine's bare
                  fork/exec/wait (and posix_spawn/wait) cost, posix_spawn rate with 2 in flight and fdatasync
                  cost (a file beside the control plane's database), all measured in the same run, and
                  issue 17's targets computed from them; the control plane's commits per job (its
                  nymph_db_commits_total). "Done" is seen by a
                  client whose GET /v1/jobs/{id}?waitS= the server answers when the job is final, so the
                  figure is what a user observes and nothing polls the server meanwhile; the server's own
                  createdAt -> finishedAt (millisecond timestamps) is printed next to it. The same round trips are
                  then timed from a C++ client (nymph-round-trip-client), without this Python client's own cost.
  50 MB of stdout: delivery MB/s (server timestamps) and the agent's peak RSS
Needs python3 only. Everything runs in a temporary directory and is stopped at the end.
NYMPH_BENCH_AGENT=path runs another nymph binary (e.g. the static build) against this build's nymph-control.
NYMPH_BENCH_SHORT_ONLY=1 measures only the /bin/true jobs (no idle or 50 MB phase).
NYMPH_BENCH_TLS=1 serves HTTPS (a throw-away self-signed certificate the agent trusts through ca_file), as in
production.
"""
import http.client, json, os, signal, ssl, statistics, subprocess, sys, tempfile, time
from datetime import datetime

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release")
NYMPH = os.environ.get("NYMPH_BENCH_AGENT", f"{build}/agent/nymph")
CONTROL = f"{build}/control/nymph-control"
BASELINE = f"{build}/bench/agent/nymph-spawn-baseline"
RUNNER_OVERHEAD = f"{build}/bench/agent/nymph-runner-overhead"
ROUND_TRIP_CLIENT = f"{build}/bench/agent/nymph-round-trip-client"
IDLE_S = float(os.environ.get("NYMPH_BENCH_IDLE_S", "60"))
ROUND_TRIPS = int(os.environ.get("NYMPH_BENCH_ROUND_TRIPS", "200"))
THROUGHPUT_JOBS = int(os.environ.get("NYMPH_BENCH_THROUGHPUT_JOBS", "400"))
TLS = os.environ.get("NYMPH_BENCH_TLS") == "1"
SHORT_ONLY = os.environ.get("NYMPH_BENCH_SHORT_ONLY") == "1"

tmp = tempfile.mkdtemp(prefix="nymph-bench-")
procs = []

def token(role):
    t = subprocess.run([CONTROL, "token", "create", "--db", f"{tmp}/cp.db", "--role", role],
                       check=True, capture_output=True, text=True).stdout.strip()
    return t

def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_s = (int(fields[11]) + int(fields[12])) / ticks
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            status[k] = v.strip()
    switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    return cpu_s, switches, int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])

conn = None

def api(method, path, body=None):
    """One admin request on a kept-alive connection."""
    global conn
    if conn is None:
        host, port = url.split("//")[1].split(":")
        if TLS:
            conn = http.client.HTTPSConnection(host, int(port), timeout=120,
                                               context=ssl.create_default_context(cafile=f"{tmp}/cert.pem"))
        else:
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {data!r}")
    return json.loads(data or b"{}")

def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

def wait_final(job_id):
    while True:
        j = api("GET", f"/v1/jobs/{job_id}?waitS=60")
        if j["state"] in ("succeeded", "failed", "cancelled", "lost"):
            return j

def submit_true_jobs(n):
    """Submits n /bin/true process jobs one after another; returns their ids."""
    return [api("POST", "/v1/jobs", {"runner": "process", "argv": ["/bin/true"]})["id"] for _ in range(n)]

def baseline(program, *mode):
    """p50 and p99 in ms of one /bin/true run, as printed by nymph-spawn-baseline / nymph-runner-overhead."""
    out = subprocess.run([program, *mode, "500", "/bin/true"], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0].split("=")[1]) / 1000, float(out[1].split("=")[1]) / 1000

def spawn_rate_in_flight(k, n=2000):
    """posix_spawn + wait of /bin/true with k in flight, runs per second (nymph-spawn-baseline --in-flight)."""
    out = subprocess.run([BASELINE, "--in-flight", str(k), str(n), "/bin/true"], check=True, capture_output=True,
                         text=True).stdout
    return float(out.split("=")[1])

def fdatasync_ms(directory, n=200):
    """p50 and p99 in ms of appending 4 KiB to a file in `directory` and fdatasync'ing it (a WAL commit's sync)."""
    path = os.path.join(directory, "fdatasync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block, times = b"x" * 4096, []
    try:
        for _ in range(n):
            os.write(fd, block)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return pct(times, 50), pct(times, 99)

def commits():
    """nymph-control's database commits so far (its /metrics counter nymph_db_commits_total)."""
    return metric("nymph_db_commits_total")

def metric(name):
    """The value of nymph-control's /metrics line `name`."""
    host, port = url.split("//")[1].split(":")
    c = (http.client.HTTPSConnection(host, int(port), timeout=30,
                                     context=ssl.create_default_context(cafile=f"{tmp}/cert.pem"))
         if TLS else http.client.HTTPConnection(host, int(port), timeout=30))
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    # None when this nymph-control has no such metric (an older build measured for comparison).
    return next((int(l.split()[1]) for l in body.splitlines() if l.startswith(name + " ")), None)

def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]

try:
    admin = token("admin")
    with open(f"{tmp}/admin-token", "w") as f:
        f.write(admin)
    os.chmod(f"{tmp}/admin-token", 0o600)
    agent_token = token("agent")
    with open(f"{tmp}/token", "w") as f:
        f.write(agent_token)
    os.chmod(f"{tmp}/token", 0o600)
    serve = [CONTROL, "serve", "--listen", "127.0.0.1:0", "--db", f"{tmp}/cp.db"]
    if TLS:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem"], check=True, capture_output=True)
        serve += ["--tls-cert", f"{tmp}/cert.pem", "--tls-key", f"{tmp}/key.pem"]
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=open(f"{tmp}/server.log", "w"), text=True)
    procs.append(server)
    url = server.stdout.readline().split()[-1]
    with open(f"{tmp}/config.toml", "w") as f:
        f.write(f'[server]\nurl = "{url}"\n' + ('ca_file = "cert.pem"\n' if TLS else '') +
                '[worker]\nlabel = "bench"\nmax_process_jobs = 2\n'
                '[runners.slurm]\nenabled = false\n'
                f'[manager]\nstate_dir = "manager"\ncluster = "{os.path.basename(tmp)}"\n'
                '[log]\nlevel = "warn"\nfile = "agent.log"\n')
    agent = subprocess.Popen([NYMPH, "run", "--config", "config.toml"], cwd=tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(agent)
    while not (os.path.exists(f"{tmp}/status.json") and '"serving"' in open(f"{tmp}/status.json").read()):
        time.sleep(0.05)
    time.sleep(2)  # let start-up settle before measuring idleness

    if not SHORT_ONLY:
        cpu0, sw0, _, _ = proc_stat(agent.pid)
        time.sleep(IDLE_S)
        cpu1, sw1, rss, _ = proc_stat(agent.pid)
        print(f"idle agent ({IDLE_S:.0f} s): RSS {rss / 1024:.1f} MiB, "
              f"CPU {(cpu1 - cpu0) * 1000 * 60 / IDLE_S:.1f} ms/min, wake-ups {(sw1 - sw0) / IDLE_S:.2f}/s")

    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    fork_p50, fork_p99 = baseline(BASELINE, "--fork")
    spawn_p50, spawn_p99 = baseline(BASELINE)
    runner_p50, runner_p99 = baseline(RUNNER_OVERHEAD)
    spawn_rate2 = spawn_rate_in_flight(2)
    sync_p50, sync_p99 = fdatasync_ms(tmp)

    seen, server_ms = [], []
    commits0 = commits()
    for _ in range(ROUND_TRIPS):
        t0 = time.perf_counter()
        j = api("POST", "/v1/jobs", {"runner": "process", "argv": ["/bin/true"]})
        done = wait_final(j["id"])
        seen.append((time.perf_counter() - t0) * 1000)
        server_ms.append((ts(done["finishedAt"]) - ts(done["createdAt"])) * 1000)
    print(f"/bin/true round trip (submit -> done, {ROUND_TRIPS} jobs one at a time): p50 {pct(seen, 50):.2f} ms, "
          f"p99 {pct(seen, 99):.2f} ms as the submitting client sees it (server timestamps: mean "
          f"{statistics.mean(server_ms):.2f} ms)")
    print(f"  this machine, same run: fork/exec/wait of /bin/true p50 {fork_p50:.2f} ms, p99 {fork_p99:.2f} ms; "
          f"posix_spawn/wait p50 {spawn_p50:.2f} ms; round trip / fork p50 = {pct(seen, 50) / fork_p50:.1f}x")
    print(f"  the agent's process runner alone (work dir, pipes, process group, reaping; no control plane): "
          f"p50 {runner_p50:.2f} ms, p99 {runner_p99:.2f} ms = {runner_p50 / fork_p50:.2f}x fork/exec/wait")
    round_trip_commits = (commits() - commits0) / ROUND_TRIPS
    budget = spawn_p50 + 2 * sync_p50 + 0.5
    lean = subprocess.run([ROUND_TRIP_CLIENT, url, f"{tmp}/admin-token", str(ROUND_TRIPS)] +
                          ([f"{tmp}/cert.pem"] if TLS else []), check=True, capture_output=True, text=True).stdout
    lean_p50, lean_p99, _, exchange_p50 = (float(f.split("=")[1]) / 1000 for f in lean.split())
    print(f"  fdatasync of a 4 KiB append beside the database: p50 {sync_p50:.2f} ms, p99 {sync_p99:.2f} ms; "
          f"control-plane commits per job {round_trip_commits:.2f}")
    print(f"  target (issue 17): p50 <= posix_spawn/wait + 2 x fdatasync + 0.5 ms = {budget:.2f} ms: "
          f"p50 {pct(seen, 50):.2f} ms = {pct(seen, 50) / budget:.2f}x the budget "
          f"({'met' if pct(seen, 50) <= budget else 'missed'})")
    print(f"  the same {ROUND_TRIPS} round trips from a C++ client (nymph-round-trip-client, nymph's HTTP client): "
          f"p50 {lean_p50:.2f} ms, p99 {lean_p99:.2f} ms = {lean_p50 / budget:.2f}x the budget "
          f"({'met' if lean_p50 <= budget else 'missed'})")
    # On a round trip's path are four one-way messages (the submission, the poll reply carrying the job, the
    # final event, the waiter's answer) and two hand-overs to the database thread and back: two plain exchanges
    # besides the syncs. (The submission's reply and the client's GET go out while the job runs.)
    floor = runner_p50 + 2 * sync_p50 + 2 * exchange_p50
    print(f"  one plain GET /v1/jobs/{{id}} exchange (loopback HTTP + a read on the database thread): p50 "
          f"{exchange_p50:.2f} ms; this design's floor, the runner alone + 2 x fdatasync + 2 such exchanges = "
          f"{floor:.2f} ms = {floor / budget:.2f}x the budget; the C++ client's p50 is {lean_p50 / floor:.2f}x it")

    commits0 = commits()
    t0 = time.perf_counter()
    ids = submit_true_jobs(THROUGHPUT_JOBS)
    submit_rate = THROUGHPUT_JOBS / (time.perf_counter() - t0)
    jobs = [wait_final(i) for i in ids]
    throughput_commits = (commits() - commits0) / THROUGHPUT_JOBS
    span = max(ts(j["finishedAt"]) for j in jobs) - min(ts(j["createdAt"]) for j in jobs)
    ok = sum(j["state"] == "succeeded" for j in jobs)
    streamed_rate = THROUGHPUT_JOBS / span
    print(f"/bin/true throughput ({THROUGHPUT_JOBS} submitted one after another while the agent runs them, 2 in "
          f"flight): {streamed_rate:.0f} jobs/s ({ok} succeeded), control-plane commits per job "
          f"{throughput_commits:.2f}; the client's submissions alone went at {submit_rate:.0f}/s")

    # The same jobs queued first (the agent SIGSTOPped meanwhile), then run: the agent and control plane alone,
    # not bounded by this client's submission rate. From SIGCONT to the last finishedAt (one clock: this machine).
    agent.send_signal(signal.SIGSTOP)
    ids = submit_true_jobs(THROUGHPUT_JOBS)
    commits0 = commits()
    polls0 = metric("nymph_poll_requests_total")
    agent_cpu0, server_cpu0 = proc_stat(agent.pid)[0], proc_stat(server.pid)[0]
    resumed = time.time()
    agent.send_signal(signal.SIGCONT)
    # One held GET for the last job while they run (a GET per job would compete with the agent and the control
    # plane for the two cores); the others are read once it is final. The figure is from the server's clock.
    wait_final(ids[-1])
    queued_commits = (commits() - commits0) / THROUGHPUT_JOBS
    agent_cpu_ms = (proc_stat(agent.pid)[0] - agent_cpu0) * 1000 / THROUGHPUT_JOBS
    server_cpu_ms = (proc_stat(server.pid)[0] - server_cpu0) * 1000 / THROUGHPUT_JOBS
    polls1 = metric("nymph_poll_requests_total")
    queued_polls = "n/a" if polls0 is None else f"{(polls1 - polls0) / THROUGHPUT_JOBS:.2f}"
    jobs = [wait_final(i) for i in ids]
    ok = sum(j["state"] == "succeeded" for j in jobs)
    rate = THROUGHPUT_JOBS / (max(ts(j["finishedAt"]) for j in jobs) - resumed)
    print(f"/bin/true throughput ({THROUGHPUT_JOBS} queued before the agent resumes, 2 in flight): {rate:.0f} jobs/s "
          f"({ok} succeeded), control-plane commits per job {queued_commits:.2f}, polls per job {queued_polls}")
    print(f"  CPU per job (its own, not its children's): agent {agent_cpu_ms:.2f} ms, nymph-control "
          f"{server_cpu_ms:.2f} ms")
    print(f"  this machine, same run: posix_spawn/wait of /bin/true with 2 in flight {spawn_rate2:.0f}/s; target "
          f"(issue 17) >= 0.5 x that = {0.5 * spawn_rate2:.0f} jobs/s: queued {rate / spawn_rate2:.2f}x the bare rate "
          f"({'met' if rate >= 0.5 * spawn_rate2 else 'missed'}); submitted while running "
          f"{streamed_rate / spawn_rate2:.2f}x")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    if SHORT_ONLY:
        sys.exit(0)

    size = 50 * 1024 * 1024
    j = api("POST", "/v1/jobs", {"runner": "process", "argv": ["/usr/bin/head", "-c", str(size), "/dev/zero"]})
    done = wait_final(j["id"])
    secs = ts(done["finishedAt"]) - ts(done["createdAt"])
    _, _, _, hwm = proc_stat(agent.pid)
    print(f"50 MB of stdout: {size / 1e6 / secs:.0f} MB/s delivered ({done['state']}), agent peak RSS {hwm / 1024:.1f} MiB")
finally:
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    subprocess.run(["rm", "-rf", tmp])
