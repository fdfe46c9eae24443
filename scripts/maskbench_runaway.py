#!/usr/bin/env python3
"""Runaway generation on MaskBench schemas, before and after the repetition stop.

Usage: scripts/maskbench_runaway.py [--sample N] [--max-tokens T] [--out FILE]

Takes a fixed sample of MaskBench schemas (from every k-th file of the sorted list, the first
one proviso compiles, so the sample is the same on every machine; schemas proviso refuses, for
example for a draft-04 `id`, are counted apart), generates one object for each with `proviso generate` on the
default model, greedy, and reports how many end valid, how many stop with `repetition`, how
many hit `length`, how many schemas proviso refuses to compile, and the mean tokens spent per
schema, in two configurations of the same run:

  before: --no-repetition-stop --attempts 1 (generation runs to the token limit)
  after:  the defaults (repetition stop, then up to 3 attempts with penalties)
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "maskbench")
BIN = os.environ.get("PROVISO_BIN", os.path.join(ROOT, "target", "release", "proviso"))


def run(path, description, max_tokens, before):
    args = [BIN, "generate", "--schema", path, "--max-tokens", str(max_tokens), "--stats"]
    if before:
        args += ["--no-repetition-stop", "--attempts", "1"]
    prompt = f"Write one JSON object for: {description}" if description else "Write one JSON object."
    args.append(prompt)
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    tokens, stops = 0, []
    for line in p.stderr.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        stats = record.get("stats")
        if stats:
            tokens += stats.get("generated_tokens", 0)
            stops.append(stats.get("stop_reason"))
    if p.returncode == 2 or (not stops and p.returncode != 0):
        outcome = "refused"
    elif p.returncode == 0:
        outcome = "valid"
    elif stops and stops[-1] == "repetition":
        outcome = "repetition"
    elif stops and stops[-1] == "length":
        outcome = "length"
    else:
        outcome = "rejected"
    return {"outcome": outcome, "tokens": tokens, "attempts": len(stops), "stops": stops}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=600)
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "maskbench-runaway.jsonl"))
    a = ap.parse_args()
    files = sorted(f for f in os.listdir(DATA) if f.endswith(".json"))
    step = max(1, len(files) // a.sample)
    totals = {}
    refused = []
    done = 0
    with open(a.out, "w") as out:
        for start in range(0, len(files), step):
            if done >= a.sample:
                break
            for name in files[start : start + step]:
                path = os.path.join(DATA, name)
                with open(path) as f:
                    doc = json.load(f)
                schema_path = os.path.join(ROOT, "target", "maskbench-schema.json")
                with open(schema_path, "w") as f:
                    json.dump(doc["schema"], f)
                check = subprocess.run([BIN, "check", "--schema", schema_path], input="{}", capture_output=True, text=True)
                if check.returncode == 2:
                    refused.append(name)
                    continue
                break
            else:
                continue
            done += 1
            with open(path) as f:
                doc = json.load(f)
            schema_path = os.path.join(ROOT, "target", "maskbench-schema.json")
            with open(schema_path, "w") as f:
                json.dump(doc["schema"], f)
            description = doc.get("description", "")
            row = {"schema": name}
            for mode in ("before", "after"):
                r = run(schema_path, description, a.max_tokens, mode == "before")
                row[mode] = r
                t = totals.setdefault(mode, {"valid": 0, "repetition": 0, "length": 0, "refused": 0, "rejected": 0, "tokens": 0, "n": 0})
                t[r["outcome"]] += 1
                t["tokens"] += r["tokens"]
                t["n"] += 1
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(name, row["before"]["outcome"], row["before"]["tokens"], "→", row["after"]["outcome"], row["after"]["tokens"], flush=True)
    print("refused while sampling:", len(refused))
    for mode, t in totals.items():
        t["mean_tokens"] = round(t["tokens"] / max(1, t["n"]), 1)
        print(mode, json.dumps(t))


if __name__ == "__main__":
    sys.exit(main())
