#!/usr/bin/env python3
"""Makes deploy/k8s/schema/ from kubernetes-validate's wheel (PyPI): the strict Kubernetes
OpenAPI JSON schemas of the kinds deploy/k8s/*.yaml use (Job batch/v1,
PersistentVolumeClaim v1) at one Kubernetes version, and of the shared _definitions.json only
the definitions they reach (the whole file is 1.4 MB); every kept schema and definition is the
wheel's value unchanged. SOURCES.md names the wheel, its SHA-256 and the version.

    python3 deploy/k8s/schema/prune.py kubernetes_validate-1.37.0-py3-none-any.whl v1.33.0
"""
import hashlib
import json
import sys
import zipfile
from pathlib import Path

KINDS = ["job-batch-v1", "persistentvolumeclaim-v1"]


def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and "#/$defs/" in r:
            out.add(r.split("#/$defs/", 1)[1])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    wheel, version = sys.argv[1], sys.argv[2]
    here = Path(__file__).resolve().parent
    base = f"kubernetes_validate/kubernetes-json-schema/{version}-local-strict/"
    with zipfile.ZipFile(wheel) as z:
        defs = json.loads(z.read(base + "_definitions.json"))
        kinds = {k: json.loads(z.read(base + k + ".json")) for k in KINDS}
    need, todo = set(), set()
    for s in kinds.values():
        refs(s, todo)
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        refs(defs["$defs"][name], todo)
    pruned = {k: v for k, v in defs.items() if k != "$defs"}
    pruned["$defs"] = {k: defs["$defs"][k] for k in sorted(need)}
    out = here / version
    out.mkdir(exist_ok=True)
    (out / "_definitions.json").write_text(json.dumps(pruned, indent=1, sort_keys=True) + "\n")
    for k, s in kinds.items():
        (out / (k + ".json")).write_text(json.dumps(s, indent=1, sort_keys=True) + "\n")
    digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
    print(f"{wheel}: sha256 {digest}; kept {len(need)} of {len(defs['$defs'])} definitions")


main()
