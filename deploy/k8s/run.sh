#!/bin/bash
# Runs the sharded tune sweep and conform fleet on a Kubernetes cluster (kind or real) with
# kubectl: the volume, the tune rounds (an Indexed Job each, deleted when complete), the
# merges, and copies the results to ./k8s-out. The fleet's configs come from FLEET_DIR
# (default configs/sonic's two). Needs the image rocesw:local on the nodes (kind: `kind load
# docker-image rocesw:local`; a real cluster: push it and change `image:`).
#
#   deploy/k8s/run.sh            # ROUNDS=4 (the --quick sweep's most)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-4}
fleet=${FLEET_DIR:-$repo/configs/sonic}
kubectl apply -f "$here/parts-pvc.yaml"
# A pod that holds the volume for copying in and out.
kubectl run rocesw-parts-io --image=rocesw:local --restart=Never --overrides='{"spec":{"securityContext":{"runAsUser":10001,"fsGroup":10001},"containers":[{"name":"io","image":"rocesw:local","command":["sleep","3600"],"volumeMounts":[{"name":"p","mountPath":"/parts"}]}],"volumes":[{"name":"p","persistentVolumeClaim":{"claimName":"rocesw-parts"}}]}}'
kubectl wait --for=condition=Ready pod/rocesw-parts-io --timeout=300s
kubectl exec rocesw-parts-io -- mkdir -p /parts/fleet
for f in "$fleet"/*.json; do kubectl cp "$f" "rocesw-parts-io:/parts/fleet/$(basename "$f")"; done
for ((r = 1; r <= rounds; r++)); do
    kubectl delete job rocesw-tune-shards --ignore-not-found --wait=true
    kubectl apply -f "$here/tune-shards.yaml"
    kubectl wait --for=condition=complete job/rocesw-tune-shards --timeout=3600s
    echo "round $r done" >&2
done
kubectl delete job rocesw-tune-shards --ignore-not-found
kubectl apply -f "$here/conform-shards.yaml"
kubectl apply -f "$here/tune-merge.yaml"
kubectl wait --for=condition=complete job/rocesw-tune-merge --timeout=600s
kubectl wait --for=condition=complete job/rocesw-conform-shards --timeout=3600s
kubectl apply -f "$here/conform-merge.yaml"
kubectl wait --for=condition=complete job/rocesw-conform-merge --timeout=600s ||
    echo "the conform merge failed: a switch failed its tests (the report says which)" >&2
mkdir -p k8s-out
kubectl cp rocesw-parts-io:/parts/tune-out k8s-out/tune-out
kubectl cp rocesw-parts-io:/parts/conform-out k8s-out/conform-out
kubectl delete pod rocesw-parts-io
echo "results in k8s-out/" >&2
