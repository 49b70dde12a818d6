#!/usr/bin/env python3
"""Memory under concurrent wrong logins (docs/benchmarks.md, "Login memory").

Starts `trellis serve` on SQLite in a temporary directory, once per
scenario, sends bursts of N wrong `login`s at the same moment (one thread
each) and reads the server's resident memory from /proc/<pid>/status:
`VmRSS` idle (after start-up and one successful login) and `VmHWM` (the
peak) after the bursts. Scenarios:

- one address, one username: the issue's case (the limiter's budget is 10);
- N addresses, N unknown usernames (through a trusted proxy's
  X-Forwarded-For): every attempt passes the limiter and needs argon2, so
  only the hashing bound keeps memory flat.

    python3 benches/login_memory/measure.py target/release/trellis [N] [BURSTS]

Give several binaries (comma-separated) to pair them in one run, e.g. a
build before and after a change: `before=/tmp/trellis-old,after=target/release/trellis`.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

PASSWORD = "admin-password-123"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def login(addr, username, password, forwarded_for=None):
    body = json.dumps(
        {
            "query": "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { accessToken } }",
            "variables": {"u": username, "p": password},
        }
    ).encode()
    headers = {"content-type": "application/json"}
    if forwarded_for:
        headers["x-forwarded-for"] = forwarded_for
    request = urllib.request.Request(f"http://{addr}/graphql", data=body, headers=headers)
    try:
        answer = json.loads(urllib.request.urlopen(request, timeout=120).read())
    except urllib.error.HTTPError as error:
        answer = json.loads(error.read())
    errors = answer.get("errors")
    return errors[0]["extensions"]["code"] if errors else "OK"


def start(binary, data):
    env = {
        "PATH": os.environ["PATH"],
        "TRELLIS_DATA_DIR": data,
        "TRELLIS_LISTEN": "127.0.0.1:0",
        "TRELLIS_LOG_FORMAT": "json",
        "TRELLIS_LOG_LEVEL": "warn,trellis=info",
        "TRELLIS_ADMIN_USER": "admin",
        "TRELLIS_ADMIN_PASSWORD": PASSWORD,
        "TRELLIS_TRUSTED_PROXIES": "127.0.0.1",
    }
    server = subprocess.Popen([binary, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("message") == "listening":
            # Keep draining the log so the server never blocks on the pipe.
            threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
            return server, event["addr"]
    raise SystemExit(f"{binary} did not start")


def burst(addr, n, spread, round_no):
    answers = [None] * n

    def one(i):
        if spread:
            answers[i] = login(addr, f"nobody-{round_no}-{i}", "wrong-password", f"198.51.{round_no}.{i + 1}")
        else:
            answers[i] = login(addr, "admin", "wrong-password")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers, time.monotonic() - started


def run(label, binary, n, bursts, spread):
    data = tempfile.mkdtemp()
    server, addr = start(binary, data)
    try:
        assert login(addr, "admin", PASSWORD) == "OK"
        time.sleep(1)
        idle = status_kib(server.pid, "VmRSS")
        codes, walls = {}, []
        for round_no in range(bursts):
            answers, wall = burst(addr, n, spread, round_no)
            walls.append(wall)
            for code in answers:
                codes[code] = codes.get(code, 0) + 1
        peak = status_kib(server.pid, "VmHWM")
        after = status_kib(server.pid, "VmRSS")
        scenario = f"{n} addresses" if spread else "one address"
        answers = ", ".join(f"{code} {count}" for code, count in sorted(codes.items()))
        print(
            f"{label}: {scenario}, {bursts} bursts of {n}: idle {idle / 1024:.1f} MiB, "
            f"peak {peak / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
            f"burst wall {min(walls):.2f}-{max(walls):.2f} s; answers: {answers}"
        )
        return peak / 1024
    finally:
        server.terminate()
        server.wait()


def main():
    binaries = sys.argv[1] if len(sys.argv) > 1 else "target/release/trellis"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    bursts = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    pairs = [part.split("=", 1) if "=" in part else (part, part) for part in binaries.split(",")]
    summary = []
    for label, binary in pairs:
        for spread in (False, True):
            peak = run(label, binary, n, bursts, spread)
            summary.append(f"{label}_{'spread' if spread else 'one'}_peak_mib={peak:.1f}")
    print(" ".join(summary))


if __name__ == "__main__":
    main()
