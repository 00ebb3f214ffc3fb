#!/usr/bin/env python3
"""Validates deploy/k8s/*.yaml against the Kubernetes OpenAPI schemas kept in schema/ (strict:
an unknown field is an error), as kubernetes-validate does: each document's schema by its
kind and apiVersion, its $refs resolved in schema/VERSION/_definitions.json. Exit status 0
when every document is valid; the errors, with their paths, otherwise.

    python3 deploy/k8s/validate.py [--version v1.33.0] [FILE.yaml ...]
"""
import argparse
import json
import re
import sys
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

HERE = Path(__file__).resolve().parent


def schema_name(doc):
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", doc["apiVersion"])
    return f"{doc['kind'].lower()}-{api}.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="v1.33.0", help="Kubernetes version of the schemas (a directory of schema/)")
    ap.add_argument("files", nargs="*", type=Path, help="manifests (default: deploy/k8s/*.yaml)")
    a = ap.parse_args()
    sdir = HERE / "schema" / a.version
    defs = json.loads((sdir / "_definitions.json").read_text())
    files = a.files or sorted(HERE.glob("*.yaml"))
    bad = 0
    checked = 0
    for f in files:
        for i, doc in enumerate(yaml.safe_load_all(f.read_text())):
            if doc is None:
                continue
            try:
                schema = json.loads((sdir / schema_name(doc)).read_text())
            except (KeyError, FileNotFoundError) as e:
                print(f"{f}: document {i}: no schema for {doc.get('kind')} {doc.get('apiVersion')}: {e}")
                bad += 1
                continue
            registry = Resource.from_contents(schema) @ Registry()
            registry = Resource.from_contents(defs) @ registry
            v = jsonschema.validators.Draft202012Validator(schema, registry=registry)
            errors = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
            for e in errors:
                path = "/".join(str(p) for p in e.absolute_path)
                print(f"{f}: {doc['kind']} {doc.get('metadata', {}).get('name')}: /{path}: {e.message}")
            bad += bool(errors)
            checked += 1
    print(f"validate: {checked} documents against Kubernetes {a.version}'s schemas, {bad} invalid")
    return 1 if bad or not checked else 0


sys.exit(main())
