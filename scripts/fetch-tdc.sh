#!/usr/bin/env bash
# Fetch the Linux kernel's own tc conformance cases (tools/testing/selftests/tc-testing/tc-tests) that
# crates/cli/tests/tdc.rs runs against `tclab tc`. They are GPL-2.0 data from the kernel's tree, not kept
# in this repository; without them the tdc tests pass as skipped and say so.
#
#   scripts/fetch-tdc.sh [DEST]      default DEST: ../shared/tdc beside this checkout (where the tests look)
#
# The cases are those of Linux 6.12 (the kernel this suite was written against). Two sources, tried in
# order (TCLAB_TDC_SOURCE=debian|git picks one):
#   debian  Debian's linux-source-6.12 package (`apt-get download`, no root needed): the 6.12 stable tree
#   git     a sparse, shallow clone of tag v6.12 from the kernel's git server
# Set TCLAB_TDC_DIR=DEST when running the tests if DEST is not the default.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$here/../shared/tdc}"
tag="v6.12"
debian_pkg="linux-source-6.12"
subdir="tools/testing/selftests/tc-testing/tc-tests"
source="${TCLAB_TDC_SOURCE:-}"

if [ -d "$dest/qdiscs" ]; then
  echo "fetch-tdc: $dest already holds the cases; remove it to fetch again"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

from_debian() {
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
  echo "fetch-tdc: downloading Debian's $debian_pkg (about 150 MB) …"
  # As root, apt drops to its sandbox user, which cannot write into our private temp dir.
  local sandbox=()
  [ "$(id -u)" = 0 ] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$work" && apt-get download -q "${sandbox[@]}" "$debian_pkg") || {
    echo "fetch-tdc: apt-get download $debian_pkg failed (run 'apt-get update' first?)" >&2
    return 1
  }
  local deb tarball
  deb="$(ls "$work"/${debian_pkg}_*.deb | head -n1)"
  echo "fetch-tdc: extracting $subdir from $(basename "$deb") …"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards "./usr/src/${debian_pkg}.tar.*"
  tarball="$(ls "$work"/usr/src/${debian_pkg}.tar.* | head -n1)"
  tar -x -C "$work" -f "$tarball" --wildcards "${debian_pkg}/${subdir}/*"
  mkdir -p "$dest"
  cp -r "$work/${debian_pkg}/${subdir}/." "$dest/"
  echo "Linux $subdir, from Debian's $(basename "$deb")" >"$dest/SOURCE"
}

from_git() {
  command -v git >/dev/null || return 1
  local url="https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git"
  echo "fetch-tdc: sparse clone of $url at $tag …"
  git clone -q --depth 1 --branch "$tag" --filter=blob:none --sparse "$url" "$work/linux" || return 1
  git -C "$work/linux" sparse-checkout set "$subdir" || return 1
  mkdir -p "$dest"
  cp -r "$work/linux/$subdir/." "$dest/"
  echo "Linux $subdir at tag $tag ($url)" >"$dest/SOURCE"
}

case "$source" in
  debian) from_debian ;;
  git) from_git ;;
  "") from_debian || from_git ;;
  *) echo "fetch-tdc: TCLAB_TDC_SOURCE must be debian or git, not '$source'" >&2; exit 64 ;;
esac || { echo "fetch-tdc: could not fetch the cases (see above)" >&2; exit 1; }

n=$(find "$dest" -name '*.json' | wc -l)
echo "fetch-tdc: $n case files in $dest"
