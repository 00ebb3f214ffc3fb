#!/usr/bin/env bash
# Builds the guest the VM tests boot: Debian 12's own kernel (linux-image-amd64) and an
# initramfs with busybox, Soft-RoCE (rdma_rxe, from the same kernel), rdma-core's
# libraries and tools, and perftest, all taken from Debian's packages with `apt-get
# download` (nothing else is fetched, nothing is installed on the host).
#
#   vm/build-guest.sh [DIR]       # default DIR: target/vm-guest (under the repository)
#
# DIR must be new, empty, or one this script made (it deletes DIR/stage and DIR/root).
# Writes DIR/vmlinuz and DIR/initrd.img (a gzip'd newc cpio). Idempotent and cached: the
# packages stay in DIR/debs, and the image is only rebuilt when this script, the guest's
# /init (vm/guest-init.sh) or the package versions change. Needs apt's package lists
# (`apt-get update` once), dpkg-deb, python3 (writes the cpio) and readelf (checks that
# every library a guest binary needs is in the image).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$REPO/target/vm-guest}

die() { echo "build-guest: $*" >&2; exit 1; }

# The directory is the caller's to name (vm/run.sh passes VM_GUEST_DIR), and the build
# deletes DIR/stage and DIR/root in it: `VM_GUEST_DIR=/` deleted /root. Only a directory this
# script made (its marker file, or the stamp and debs/ of an earlier version), or a new or
# empty one, is used.
MARKER=.rocesw-vm-guest
REAL=$(realpath -m -- "$OUT")
[ "$REAL" != / ] || die "refusing to build the guest in / (DIR or VM_GUEST_DIR): it deletes DIR/stage and DIR/root; give a directory of its own"
if [ -d "$REAL" ] && [ -n "$(ls -A -- "$REAL")" ] && [ ! -e "$REAL/$MARKER" ] \
    && ! { [ -f "$REAL/stamp" ] && [ -d "$REAL/debs" ]; }; then
    die "refusing to build the guest in $OUT (DIR or VM_GUEST_DIR): it is not empty and was not made by build-guest.sh (no $MARKER), and the build deletes $OUT/stage and $OUT/root; give a new or empty directory"
fi
mkdir -p "$OUT/debs"
OUT=$(cd "$OUT" && pwd)
touch "$OUT/$MARKER"
for tool in apt-get apt-cache dpkg-deb python3 readelf gzip; do
    command -v "$tool" >/dev/null || die "needs $tool"
done

# The kernel: whatever ABI linux-image-amd64 points at today.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[ -n "$KPKG" ] || die "apt knows no linux-image-amd64 (run apt-get update)"

# Everything the guest runs. Userspace: busybox (shell, ip, ping, insmod...), iproute2's
# `rdma` (creates the rxe device), rdma-core's libraries and the rxe provider, ibverbs-utils
# (ibv_rc_pingpong, ibv_devinfo), rdmacm-utils (rping) and perftest; then the libraries
# those need (checked below: a missing one is an error naming it).
PKGS=(
    "$KPKG" busybox-static
    iproute2 libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils rdmacm-utils perftest
    libc6 libgcc-s1 libnl-3-200 libnl-route-3-200 libibumad3 libpci3 libudev1
    libbpf1 libbsd0 libmd0 libcap2 libdb5.3 libelf1 zlib1g libmnl0 libselinux1 libpcre2-8-0
    libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0
    libkeyutils1 libxtables12 libzstd1
)
# Binaries copied into the image (from the extracted packages).
BINS=(
    busybox ip rdma ibv_devinfo ibv_rc_pingpong rping
    ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat ib_read_lat
)
# Kernel modules: virtio-net, Soft-RoCE and the rdma_cm stack; their dependencies are added
# from the modules' own `depends=`, and /init loads them in that order. crc32_generic: rxe
# computes the ICRC with crc32 ("rdma link add" fails with ENOENT without it).
MODS=(virtio_pci virtio_net crc32_generic rdma_rxe ib_uverbs rdma_ucm rdma_cm)

VERSIONS=$(apt-cache policy "${PKGS[@]}" 2>/dev/null | awk '/^[^ ]/{p=$1} /Candidate:/{print p, $2}')
STAMP=$( { echo "$VERSIONS"; cat "$0" "$REPO/vm/guest-init.sh"; } | sha256sum | cut -c1-16)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$STAMP" ] && [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initrd.img" ]; then
    echo "build-guest: $OUT is up to date ($KPKG)"
    exit 0
fi

# Download what is not cached yet (apt-get download writes into the current directory).
deb_of() {  # the cached .deb of package $1 at the version apt lists, if any
    local v
    v=$(echo "$VERSIONS" | awk -v p="$1:" '$1==p{print $2}')
    [ -n "$v" ] && [ "$v" != "(none)" ] || die "apt has no candidate for $1 (apt-get update?)"
    ls "$OUT/debs/${1}_${v//:/%3a}_"*.deb 2>/dev/null | head -1
}
need=()
for p in "${PKGS[@]}"; do [ -n "$(deb_of "$p")" ] || need+=("$p"); done
if ((${#need[@]})); then
    echo "build-guest: apt-get download ${need[*]}"
    # (apt warns that it downloads as root, unsandboxed, into a directory _apt cannot read)
    (cd "$OUT/debs" && apt-get download -q "${need[@]}" 2>&1 >/dev/null | grep -v 'unsandboxed as root' >&2) || true
    for p in "${need[@]}"; do
        [ -z "$(deb_of "$p")" ] || continue
        # Package lists older than the mirror name versions it no longer has: refresh them
        # once and start again with the new versions.
        [ -z "${BUILD_GUEST_UPDATED:-}" ] || die "apt-get download $p failed"
        echo "build-guest: apt-get update (no $p on the mirror at the listed version?)"
        apt-get update -qq || die "apt-get update failed"
        BUILD_GUEST_UPDATED=1 exec "$0" "$OUT"
    done
fi

STAGE=$OUT/stage
ROOT=$OUT/root
rm -rf "$STAGE" "$ROOT"
mkdir -p "$STAGE" "$ROOT"
for p in "${PKGS[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$STAGE"; done
KVER=${KPKG#linux-image-}
cp "$STAGE/boot/vmlinuz-$KVER" "$OUT/vmlinuz.new"

# Userspace: the binaries (iproute2's ip: busybox's cannot add a neighbour), then every
# library they need, resolved inside the stage (usr-merged: /lib -> usr/lib in the image).
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/lib/x86_64-linux-gnu/libibverbs,etc/libibverbs.d,proc,sys,dev,tmp,run,mnt}
ln -s usr/lib "$ROOT/lib"
ln -s usr/lib "$ROOT/lib64"
for b in "${BINS[@]}"; do
    src=
    for d in usr/bin bin usr/sbin sbin; do [ -f "$STAGE/$d/$b" ] && { src=$STAGE/$d/$b; break; }; done
    [ -n "$src" ] || die "no $b in the packages"
    cp "$src" "$ROOT/usr/bin/"
done
cp "$STAGE"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so "$ROOT/usr/lib/x86_64-linux-gnu/libibverbs/"
cp "$STAGE/etc/libibverbs.d/rxe.driver" "$ROOT/etc/libibverbs.d/"
cp "$STAGE/lib64/ld-linux-x86-64.so.2" "$ROOT/usr/lib/" 2>/dev/null ||
    cp -L "$STAGE/usr/lib64/ld-linux-x86-64.so.2" "$ROOT/usr/lib/"
find_lib() {
    local d
    for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu; do
        [ -e "$STAGE/$d/$1" ] && { echo "$STAGE/$d/$1"; return; }
    done
}
todo=("$ROOT"/usr/bin/* "$ROOT"/usr/lib/x86_64-linux-gnu/libibverbs/*.so)
declare -A have=()
while ((${#todo[@]})); do
    f=${todo[0]}; todo=("${todo[@]:1}")
    for so in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [ -n "${have[$so]:-}" ] && continue
        [ "$so" = ld-linux-x86-64.so.2 ] && continue
        src=$(find_lib "$so")
        [ -n "$src" ] || die "$(basename "$f") needs $so, which no package in PKGS provides"
        cp -L "$src" "$ROOT/usr/lib/x86_64-linux-gnu/$so"
        have[$so]=1
        todo+=("$ROOT/usr/lib/x86_64-linux-gnu/$so")
    done
done
# glibc dlopen()s libgcc_s for pthread_exit/cancellation (rping's threads): no NEEDED entry.
cp -L "$(find_lib libgcc_s.so.1)" "$ROOT/usr/lib/x86_64-linux-gnu/"
for a in $("$ROOT/usr/bin/busybox" --list); do
    [ -e "$ROOT/usr/bin/$a" ] || ln -s busybox "$ROOT/usr/bin/$a"
done
for a in "$ROOT"/usr/bin/*; do ln -sf "../usr/bin/$(basename "$a")" "$ROOT/bin/"; ln -sf "../usr/bin/$(basename "$a")" "$ROOT/sbin/"; done

# Kernel modules: the closure of MODS over depends=, decompressed, and the load order.
MODDIR=$STAGE/lib/modules/$KVER
[ -d "$MODDIR" ] || MODDIR=$STAGE/usr/lib/modules/$KVER
mkdir -p "$ROOT/modules"
python3 - "$MODDIR" "$ROOT/modules" "${MODS[@]}" <<'PY'
import lzma, os, subprocess, sys
moddir, out, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
files = {}
for d, _, fs in os.walk(moddir):
    for f in fs:
        for ext in (".ko", ".ko.xz", ".ko.zst"):
            if f.endswith(ext):
                files[f[: -len(ext)].replace("-", "_")] = os.path.join(d, f)
def read(name):
    p = files[name]
    if p.endswith(".xz"):
        return lzma.open(p).read()
    if p.endswith(".zst"):
        return subprocess.run(["zstd", "-dc", p], check=True, capture_output=True).stdout
    return open(p, "rb").read()
def builtin(name):
    return name not in files
order, seen = [], set()
def visit(name):
    if name in seen:
        return
    seen.add(name)
    if builtin(name):
        b = os.path.join(moddir, "modules.builtin")
        if any(l.strip().endswith("/" + name + ".ko") for l in open(b)):
            return
        sys.exit(f"build-guest: no kernel module {name}")
    data = read(name)
    for field in data.split(b"\0"):
        if field.startswith(b"depends="):
            for dep in filter(None, field[8:].decode().split(",")):
                visit(dep.replace("-", "_"))
    open(os.path.join(out, name + ".ko"), "wb").write(data)
    order.append(name)
for m in wanted:
    visit(m)
open(os.path.join(out, "order"), "w").write("\n".join(order) + "\n")
print("build-guest: modules", " ".join(order))
PY

cp "$REPO/vm/guest-init.sh" "$ROOT/init"
chmod 755 "$ROOT/init"

# The cpio (newc), written by Python: no cpio tool needed on the host.
python3 - "$ROOT" "$OUT/initrd.img.new" <<'PY'
import gzip, os, stat, sys
root, out = sys.argv[1], sys.argv[2]
ino = [1]
def entry(w, name, st, data=b""):
    hdr = "070701" + "".join("%08x" % v for v in (
        ino[0], st.st_mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0))
    ino[0] += 1
    b = hdr.encode() + name.encode() + b"\0"
    b += b"\0" * (-len(b) % 4)
    w.write(b + data + b"\0" * (-len(data) % 4))
with gzip.open(out, "wb", compresslevel=6) as w:
    for d, dirs, fs in os.walk(root):
        dirs.sort()
        for n in sorted(dirs) + sorted(fs):
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                entry(w, rel, st, os.readlink(p).encode())
            elif stat.S_ISREG(st.st_mode):
                entry(w, rel, st, open(p, "rb").read())
            elif stat.S_ISDIR(st.st_mode):
                entry(w, rel, st)
    class Node:
        def __init__(self, mode): self.st_mode = mode
    # /dev/console: the kernel opens it for init before anything is mounted.
    hdr = "070701" + "".join("%08x" % v for v in (
        ino[0], stat.S_IFCHR | 0o600, 0, 0, 1, 0, 0, 0, 0, 5, 1, len("dev/console") + 1, 0))
    b = hdr.encode() + b"dev/console\0"
    w.write(b + b"\0" * (-len(b) % 4))
    entry(w, "TRAILER!!!", Node(0))
PY
mv "$OUT/vmlinuz.new" "$OUT/vmlinuz"
mv "$OUT/initrd.img.new" "$OUT/initrd.img"
rm -rf "$STAGE"
echo "$STAMP" > "$OUT/stamp"
echo "build-guest: $OUT/vmlinuz ($KPKG), $OUT/initrd.img ($(du -k "$OUT/initrd.img" | cut -f1) KiB)"
