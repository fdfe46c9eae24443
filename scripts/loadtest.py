#!/usr/bin/env python3
"""A bounded load test of `proviso serve`, loopback only, standard library only.

    scripts/loadtest.py --url http://127.0.0.1:8080 [--concurrency 1,4,16] [--requests 32]
                        [--max-seconds 300] [--json FILE]

For each concurrency level it sends at most --requests tool-call requests (tool_choice
required, greedy) from that many client threads, stopping early after --max-seconds. It
reports requests per second, aggregate generated tokens per second, latency percentiles of
successful requests and the grammar masks' share of the token latency (from the server's
/metrics, when it serves them), counts responses by status, and checks every returned tool
call against the declared schema: a call that does
not validate, or a 5xx other than a deliberate 503 (queue full), is a failure and makes the
script exit 1.
"""

import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_arm",
            "description": "Reads the arms of one clinical trial.",
            "parameters": {
                "type": "object",
                "properties": {
                    "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                    "arm_label": {"type": "string", "enum": ["A", "B", "C"]},
                },
                "required": ["trial_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_trials",
            "description": "Full-text search over trials.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 2, "maxLength": 40}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
]
QUESTIONS = [
    "Which arms of trial NCT04123456 were terminated?",
    "Find trials about migraine.",
    "What is arm B of NCT05550001?",
    "Search for asthma studies.",
]


def invalid_call(call):
    """Returns why a returned call breaks its declaration, or None."""
    try:
        name = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
    except (KeyError, TypeError, ValueError) as e:
        return f"unreadable call: {e}"
    if not isinstance(args, dict):
        return "arguments are not an object"
    if name == "get_arm":
        if set(args) - {"trial_id", "arm_label"}:
            return f"undeclared argument in {args}"
        if not isinstance(args.get("trial_id"), str) or not re.fullmatch(r"NCT[0-9]{8}", args["trial_id"]):
            return f"bad trial_id in {args}"
        if "arm_label" in args and args["arm_label"] not in ("A", "B", "C"):
            return f"bad arm_label in {args}"
    elif name == "search_trials":
        if set(args) != {"query"} or not isinstance(args["query"], str) or not 2 <= len(args["query"]) <= 40:
            return f"bad query in {args}"
    else:
        return f"undeclared tool {name}"
    if not call.get("id"):
        return "missing id"
    return None


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def served_model(url):
    """The first model the server lists: a request naming another one is refused."""
    connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
    connection.request("GET", "/v1/models")
    return json.loads(connection.getresponse().read())["data"][0]["id"]


def metric_sums(url):
    """Sums of the mask and token-latency histograms on /metrics, or None without them."""
    try:
        connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        text = response.read().decode()
        if response.status != 200:
            return None
    except (OSError, http.client.HTTPException):
        return None
    sums = {}
    for line in text.splitlines():
        for name in ("mask_seconds_sum", "token_latency_seconds_sum"):
            if line.split(" ")[0].endswith(name):
                sums[name] = float(line.split(" ")[-1])
    return sums if len(sums) == 2 else None


def level(url, concurrency, requests, max_seconds, max_tokens):
    host, port = url.hostname, url.port or 80
    model = served_model(url)
    before = metric_sums(url)
    generated = 0
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.monotonic() + max_seconds
    latencies, statuses, failures = [], {}, []
    calls = 0

    def client():
        nonlocal calls, generated
        connection = http.client.HTTPConnection(host, port, timeout=max_seconds + 60)
        while time.monotonic() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            body = json.dumps({
                "model": model,
                "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                "tools": TOOLS, "tool_choice": "required", "temperature": 0, "max_tokens": max_tokens,
            })
            started = time.monotonic()
            try:
                connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                payload = response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    failures.append(f"transport error: {e}")
                connection.close()
                connection = http.client.HTTPConnection(host, port, timeout=max_seconds + 60)
                continue
            elapsed = time.monotonic() - started
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    latencies.append(elapsed)
                    answer = json.loads(payload)
                    generated += answer.get("usage", {}).get("completion_tokens", 0)
                    choice = answer["choices"][0]
                    if choice["finish_reason"] == "tool_calls":
                        for call in choice["message"]["tool_calls"]:
                            calls += 1
                            why = invalid_call(call)
                            if why:
                                failures.append(f"invalid tool call returned: {why}")
                    elif choice["finish_reason"] != "length":
                        failures.append(f"tool_choice required answered with {choice['finish_reason']}")
                elif status >= 500 and status != 503:
                    failures.append(f"status {status}: {payload[:200]!r}")
        connection.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    ok = statuses.get(200, 0)
    after = metric_sums(url)
    mask_share = None
    if before and after:
        token_time = after["token_latency_seconds_sum"] - before["token_latency_seconds_sum"]
        if token_time > 0:
            mask_share = round(100 * (after["mask_seconds_sum"] - before["mask_seconds_sum"]) / token_time, 2)
    return {
        "generated_tokens": generated,
        "tokens_per_s": round(generated / wall, 1) if wall else 0.0,
        "mask_share_pct": mask_share,
        "concurrency": concurrency,
        "requests": sum(statuses.values()),
        "ok": ok,
        "status_counts": statuses,
        "wall_s": round(wall, 2),
        "rps": round(ok / wall, 3) if wall else 0.0,
        "p50_ms": round(percentile(latencies, 50) * 1000),
        "p90_ms": round(percentile(latencies, 90) * 1000),
        "p99_ms": round(percentile(latencies, 99) * 1000),
        "tool_calls_checked": calls,
        "failures": failures,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--requests", type=int, default=32, help="requests per level (bounded)")
    parser.add_argument("--max-seconds", type=float, default=300, help="time limit per level")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args()
    url = urllib.parse.urlparse(args.url)
    if url.hostname not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("loadtest: loopback only (127.0.0.1, localhost, ::1)")
    if not 1 <= args.requests <= 1000:
        sys.exit("loadtest: --requests must be from 1 to 1000")
    results = [level(url, int(c), args.requests, args.max_seconds, args.max_tokens) for c in args.concurrency.split(",")]
    base = results[0]["tokens_per_s"] or float("nan")
    print("| clients | requests | 200 | 503 | other | req/s | tokens/s | × first level | p50 | p90 | p99 | mask share | tool calls checked | failures |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        other = r["requests"] - r["ok"] - r["status_counts"].get(503, 0)
        share = "n/a" if r["mask_share_pct"] is None else f"{r['mask_share_pct']}%"
        print(f"| {r['concurrency']} | {r['requests']} | {r['ok']} | {r['status_counts'].get(503, 0)} | {other} | {r['rps']} | "
              f"{r['tokens_per_s']} | {r['tokens_per_s'] / base:.2f}× | "
              f"{r['p50_ms']} ms | {r['p90_ms']} ms | {r['p99_ms']} ms | {share} | {r['tool_calls_checked']} | {len(r['failures'])} |")
    for r in results:
        for f in r["failures"][:5]:
            print(f"failure at {r['concurrency']} clients: {f}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    sys.exit(1 if any(r["failures"] for r in results) else 0)


if __name__ == "__main__":
    main()
