#!/usr/bin/env bash
# The nvtop that bench/device.sh measures gputui against, as a folder to carry to a GPU machine
# that has no nvtop and no network (run here, on a Debian or Ubuntu machine with apt and the
# network; as any user):
#
#   bash bench/fetch_nvtop.sh [DIR]     (default .device/nvtop, which git ignores)
#
# Downloads Debian bookworm's nvtop 3.0.1-1 (contrib; the build the issue-25 and issue-33
# figures were taken with) and the libraries it needs that a bare image may lack (ncurses,
# tinfo), each unpacked with dpkg -x under DIR: DIR/usr/bin/nvtop, DIR/lib/x86_64-linux-gnu.
# bench/device.sh finds DIR/usr/bin/nvtop by itself (NVTOP=PATH overrides) and adds DIR's
# library folders to LD_LIBRARY_PATH for nvtop alone when it does not start without them.
# With the device tool: carry ".device/nvtop" (about 0.6 MB) beside ".whl" and the base tree.
# apt's lists go to a scratch folder: the machine's own apt state is not touched.
set -eu
dir=${1:-.device/nvtop}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial" "$scratch/debs" "$dir"
echo "deb http://deb.debian.org/debian bookworm main contrib" > "$scratch/sources.list"
o=(-o "Dir::State::Lists=$scratch/lists" -o "Dir::Etc::SourceList=$scratch/sources.list"
   -o Dir::Etc::SourceParts=/dev/null -o "Dir::Cache=$scratch/cache" -o Debug::NoLocking=1
   -o APT::Architecture=amd64 -o APT::Architectures=amd64)
apt-get "${o[@]}" -qq update
(cd "$scratch/debs" && apt-get "${o[@]}" -qq download nvtop libncursesw6 libtinfo6)
for deb in "$scratch"/debs/*.deb; do dpkg -x "$deb" "$dir"; done
ls "$scratch/debs" > "$dir/PACKAGES"
"$dir/usr/bin/nvtop" --version || LD_LIBRARY_PATH="$dir/lib/x86_64-linux-gnu:$dir/usr/lib/x86_64-linux-gnu" "$dir/usr/bin/nvtop" --version
echo "nvtop in $dir/usr/bin/nvtop ($(du -sh "$dir" | cut -f1)); carry it as $dir"
