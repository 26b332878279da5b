#!/usr/bin/env python3
"""verdict-line.py RESULTS: the first statistical check of a reckon results.json as one TSV
cell pair, "outcome<TAB>message" ("none<TAB>" when the run has none). Used by the ci/measure
scripts that record one row per gate run."""
import json
import sys

r = json.load(open(sys.argv[1]))
for c in r.get("checks", []):
    if c.get("kind") in ("throughput", "latency"):
        print(c.get("outcome", "?") + "\t" + c.get("message", "").replace("\t", " "))
        break
else:
    print("none\t")
