#!/usr/bin/env python3
"""CPU per request for the costliest GraphQL documents the request limits
still allow (docs/benchmarks.md, "Request limits").

Starts `trellis serve` on SQLite in a temporary directory, sends each
document N times, and reads the server's own CPU time (utime + stime in
/proc/<pid>/stat) before and after: the figure is the server's CPU per
request, whatever the client costs.

    python3 benches/request_limits/measure.py target/release/trellis [N]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def doubling(levels):
    doc = f"{{ ...F{levels} }} fragment F0 on Query {{ __typename }}"
    for i in range(1, levels + 1):
        doc += f" fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}"
    return doc


def wide(spreads, body_bytes):
    """One fragment of about `body_bytes`, spread `spreads` times."""
    head = "{ " + "...F " * spreads + "} fragment F on Query { "
    fields = (body_bytes - len(head) - 64) // len("__typename ")
    return head + "__typename " * fields + "}"


def introspection():
    type_ref = "kind name" + " ofType { kind name" * 9 + " }" * 9
    return (
        "query IntrospectionQuery { __schema { queryType { name } mutationType { name } "
        "subscriptionType { name } types { ...FullType } directives { name description "
        "locations args { ...InputValue } } } } "
        "fragment FullType on __Type { kind name description fields(includeDeprecated: true) "
        "{ name description args { ...InputValue } type { ...TypeRef } isDeprecated "
        "deprecationReason } inputFields { ...InputValue } interfaces { ...TypeRef } "
        "enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason } "
        "possibleTypes { ...TypeRef } } "
        "fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue } "
        f"fragment TypeRef on __Type {{ {type_ref} }}"
    )


FEEDS = 20


def post(addr, document, variables=None, token=None):
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    body = json.dumps({"query": document, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"http://{addr}/graphql", data=body, headers=headers)
    return json.loads(urllib.request.urlopen(request).read())


def sign_in_with_feeds(addr, count):
    """The admin's token, with `count` feeds (never fetched: port 9 refuses)."""
    login = post(addr, 'mutation { login(username: "bench", password: "bench-password-1") { accessToken } }')
    token = login["data"]["login"]["accessToken"]
    feeds = [{"link": f"http://127.0.0.1:9/feed-{i}.xml", "name": f"Feed {i}"} for i in range(count)]
    created = post(addr, "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }", {"i": feeds}, token)
    assert len(created["data"]["createFeeds"]) == count, created
    return token


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    data = tempfile.mkdtemp()
    env = {
        "PATH": os.environ["PATH"],
        "TRELLIS_DATA_DIR": data,
        "TRELLIS_LISTEN": "127.0.0.1:0",
        "TRELLIS_LOG_FORMAT": "json",
        "TRELLIS_LOG_LEVEL": "warn,trellis=info",
        "TRELLIS_ADMIN_USER": "bench",
        "TRELLIS_ADMIN_PASSWORD": "bench-password-1",
        "TRELLIS_ALLOW_PRIVATE_FEEDS": "true",
    }
    server = subprocess.Popen([binary, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    addr = None
    for line in server.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("message") == "listening":
            addr = event["addr"]
            break
    token = sign_in_with_feeds(addr, FEEDS)
    limit = 1024 * 1024
    chain = "{ groups { feeds { group { feeds { group { feeds { group { feeds { id } } } } } } } } }"
    nested = "{ feeds { group { feeds { id name link } } } }"
    cases = [
        ("baseline `{ __typename }`", "{ __typename }"),
        ("doubling chain, 5 levels (62 spreads, allowed)", doubling(5)),
        ("doubling chain, 22 levels (refused)", doubling(22)),
        ("one ~1 MiB fragment spread 100 times (refused)", wide(100, limit - 100)),
        ("a 100-field fragment spread 100 times (allowed)", wide(100, 100 * 11 + 600)),
        ("10,000 fields, no fragment (allowed)", "{ " + "__typename " * 10_000 + "}"),
        ("graphql-js standard introspection query", introspection()),
        (f"issue's groups/feeds chain, depth 9, {FEEDS} feeds (refused)", chain),
        (f"feeds {{ group {{ feeds {{ 3 fields }} }} }}, {FEEDS} feeds (allowed: 30,000)", nested),
    ]
    try:
        for name, document in cases:
            body = json.dumps({"query": document}).encode()
            request = lambda: urllib.request.urlopen(
                urllib.request.Request(
                    f"http://{addr}/graphql",
                    data=body,
                    headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
                )
            ).read()
            answer = json.loads(request())
            error = (answer.get("errors") or [{}])[0].get("extensions", {}).get("code")
            before, started = cpu_seconds(server.pid), time.monotonic()
            for _ in range(n):
                request()
            cpu = (cpu_seconds(server.pid) - before) / n
            wall = (time.monotonic() - started) / n
            print(
                f"{name}: {len(body)} bytes, answer {error or 'data'}, "
                f"server CPU {cpu * 1000:.2f} ms/request, wall {wall * 1000:.2f} ms"
            )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
