#!/usr/bin/env python3
"""Latency of one chat under outside CPU load, by thread count.

Usage:
    scripts/threads_under_load.py [--binary target/release/proviso] [--repeats 5]
                                  [--threads 2,1] [--busy 0,2] [--parallel 1]

For each thread count and each number of busy-looping processes beside the server, starts
`proviso serve --threads T`, sends one warm-up chat, then `--repeats` identical greedy chats
(32 tokens) one after another, and prints a Markdown table of the median and worst latency.
Nothing else may run on the machine meanwhile. Standard library only.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request

PROMPT = {"messages": [{"role": "user", "content": "Write two sentences about lighthouses."}],
          "max_tokens": 32, "temperature": 0}


def chat(port):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     data=json.dumps(PROMPT).encode(),
                                     headers={"Content-Type": "application/json"})
    started = time.time()
    with urllib.request.urlopen(request, timeout=600) as response:
        body = json.load(response)
    return time.time() - started, body["usage"]["completion_tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/proviso")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--busy", default="0,2")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--port", type=int, default=18123)
    args = ap.parse_args()
    rows = []
    for busy_count in [int(b) for b in args.busy.split(",")]:
        for threads in [t for t in args.threads.split(",")]:
            command = [args.binary, "serve", "--port", str(args.port), "--parallel", str(args.parallel)]
            if threads != "default":
                command += ["--threads", threads]
            server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for line in server.stderr:
                if "serving" in line:
                    break
            chat(args.port)
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy_count)]
            time.sleep(1)
            times = []
            tokens = 0
            for _ in range(args.repeats):
                took, tokens = chat(args.port)
                times.append(took)
            for b in busy:
                b.kill()
            server.terminate()
            server.wait()
            rows.append((busy_count, threads, statistics.median(times), max(times), tokens))
            print(f"busy {busy_count}, threads {threads}: median {statistics.median(times):.2f} s, worst {max(times):.2f} s", file=sys.stderr)
    print("| busy processes beside | threads | median | worst | tokens |\n|---|---|---|---|---|")
    for busy_count, threads, median, worst, tokens in rows:
        print(f"| {busy_count} | {threads} | {median:.2f} s | {worst:.2f} s | {tokens} |")


if __name__ == "__main__":
    main()
