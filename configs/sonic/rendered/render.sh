#!/bin/bash
# Re-render the config_db.json files of this directory with sonic-buildimage's own
# sonic-cfggen. Usage: render.sh WORKDIR [SONIC_BUILDIMAGE_GIT_DIR]
# Needs python3 (3.11 used), git, and PyPI for the venv. See SOURCES for what each
# step is and why; the outputs land in WORKDIR/out/.
set -euo pipefail
W=$(realpath -m "$1"); R=${2:-/work/.mirror/sonic-net+sonic-buildimage/repo}
C=086b03bd70f9e211aaaf5f6aefe0790b508d2a94
mkdir -p "$W/out" "$W/stubs/swsscommon"; cd "$W"

# 1. The tree at commit C: the config engine, sonic-py-common, the shared build
#    templates and the six platforms' device directories (symlinks kept).
for p in src/sonic-config-engine src/sonic-py-common files/build_templates \
         device/mellanox/x86_64-mlnx_msn2700-r0 device/mellanox/x86_64-nvidia_sn5600-r0 \
         device/arista/x86_64-arista_7260cx3_64 device/common/profiles/th2/7260 \
         device/dell/x86_64-dell_s6100_c2538-r0/Force10-S6100 device/common/profiles/th/6100 \
         device/arista/x86_64-arista_7060x6_64pe_b/Arista-7060X6-64PE-B-P64; do
  git -C "$R" ls-tree -r "$C" -- "$p" | while read -r mode _ obj path; do
    mkdir -p "$(dirname "$path")"
    if [ "$mode" = 120000 ]; then ln -sfn "$(git -C "$R" cat-file blob "$obj")" "$path";
    else git -C "$R" cat-file blob "$obj" > "$path"; fi
  done
done

# 2. Python deps of sonic-config-engine's setup.py, from PyPI.
[ -d venv ] || { python3 -m venv venv && venv/bin/pip install -q jinja2 netaddr==0.8.0 pyyaml lxml natsort bitarray; }

# 3. Stubs for the two modules that are not on PyPI (C++ / libyang bindings).
: > stubs/swsscommon/__init__.py
cat > stubs/swsscommon/swsscommon.py <<'PY'
"""Stub of sonic-swss-common's SWIG module (C++, not on PyPI). Rendering from a
minigraph with --print-data needs no database: as on a host without redis, every
connection attempt raises and the callers fall back to the files they were given.
Only ConfigDBConnector's key (de)serialisation is used ('|'-joined tuples)."""
class _NoDb:
    def __init__(self, *a, **k):
        pass
    def connect(self, *a, **k):
        raise RuntimeError("swsscommon stub: no database")
    db_connect = connect
    get_table = connect
class _ConfigDb(_NoDb):
    @staticmethod
    def serialize_key(key, separator='|'):
        return separator.join(key) if isinstance(key, tuple) else str(key)
    @staticmethod
    def deserialize_key(key, separator='|'):
        parts = key.split(separator)
        return tuple(parts) if len(parts) > 1 else key
ConfigDBConnector = ConfigDBPipeConnector = _ConfigDb
SonicV2Connector = DBConnector = Table = _NoDb
class SonicDBConfig:
    isInit = isGlobalInit = staticmethod(lambda: False)
    load_sonic_global_db_config = initialize = staticmethod(lambda *a, **k: None)
PY
cat > stubs/sonic_yang.py <<'PY'
"""Stub of sonic-yang-mgmt (libyang); only sonic-cfggen's -Y input uses it."""
class SonicYang:
    def __init__(self, *a, **k):
        raise RuntimeError("sonic_yang stub: YANG input unavailable")
PY

# 4. The S6100 minigraph selects the RDMA-CENTRIC MMU profile; on a switch
#    minigraph.select_mmu_profiles copies that profile's four files over the SKU's
#    defaults before rendering. Do the same copy here.
S=device/dell/x86_64-dell_s6100_c2538-r0/Force10-S6100
for f in pg_profile_lookup.ini qos.json.j2 buffers_defaults_t0.j2 buffers_defaults_t1.j2; do
  rm -f "$S/$f"; cp "$S/RDMA-CENTRIC/$f" "$S/$f"
done

# 5. Render: minigraph + port_config.ini, then buffers.json.j2 and qos.json.j2 merged
#    into the config (",config-db"), as `config load_minigraph` + `config qos reload`
#    do, printed as one config_db.json.
export PYTHONPATH="$W/stubs:$W/src/sonic-py-common:$W/src/sonic-config-engine"
T=src/sonic-config-engine/tests
render() { # out minigraph skudir [extra args]
  local out=$1 mg=$2 d=$3; shift 3
  venv/bin/python src/sonic-config-engine/sonic-cfggen -m "$T/$mg" -p "$d/port_config.ini" "$@" \
    -t "$d/buffers.json.j2,config-db" -t "$d/qos.json.j2,config-db" --print-data > "out/$out"
}
render acs-msn2700-t1.json t1-sample-graph-mlnx.xml device/mellanox/x86_64-mlnx_msn2700-r0/ACS-MSN2700
render acs-sn5600-t1.json t1-sample-graph-mlnx.xml device/mellanox/x86_64-nvidia_sn5600-r0/ACS-SN5600 \
  -a '{"DEVICE_METADATA":{"localhost":{"hwsku":"ACS-SN5600"}}}' 2>/dev/null
render mellanox-sn5600-c256s1-t1.json t1-sample-graph-mlnx.xml device/mellanox/x86_64-nvidia_sn5600-r0/Mellanox-SN5600-C256S1 \
  -a '{"DEVICE_METADATA":{"localhost":{"hwsku":"Mellanox-SN5600-C256S1"}}}' 2>/dev/null
render arista-7260cx3-c64-t1-remap.json sample-arista-7260-t1-minigraph.xml device/arista/x86_64-arista_7260cx3_64/Arista-7260CX3-C64
render arista-7260cx3-c64-t1.json sample-arista-7260-t1-minigraph-remap-disabled.xml device/arista/x86_64-arista_7260cx3_64/Arista-7260CX3-C64
PLATFORM=x86_64-dell_s6100_c2538-r0 render force10-s6100-t0.json sample-dell-6100-t0-minigraph.xml "$S" 2>/dev/null
render arista-7060x6-64pe-b-p64-ft2.json sample-ft2-p64-minigraph.xml device/arista/x86_64-arista_7060x6_64pe_b/Arista-7060X6-64PE-B-P64
ls -l out/
