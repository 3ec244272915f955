#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-dist.sh BUILD DEST - a self-contained stepprof: DEST/bin/stepprof, DEST/lib/libstepprof.so (and
# libstepprof-nomalloc.so, the same without the malloc hooks) and every non-system library they
# need (found through $ORIGIN rpaths), for machines without the -dev packages (the GPU machine);
# DEST/share: the docs and recipes (doc/stepprof), the man page, bash completion, and the demo
# (stepprof/demo.sh with workload.cu and a shipped GPU trace: it works from DEST alone).
# The same layout as `make install PREFIX=DEST`. System libraries (glibc, libgcc, libstdc++) are
# not copied.
set -euo pipefail
B=${1:-build} D=${2:-dist/stepprof}
rm -rf "$D" && mkdir -p "$D/bin" "$D/lib"
cp "$B/stepprof" "$D/bin/" && cp "$B/libstepprof.so" "$B/libstepprof-nomalloc.so" "$D/lib/"
make --no-print-directory -s install-share PREFIX="$(cd "$D" && pwd)" O="$B"
system='^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libgcc_s|libstdc\+\+)'
for f in "$D/bin/stepprof" "$D/lib/libstepprof.so"; do
	ldd "$f" | awk '/=> \//{print $1, $3}' | while read -r name path; do
		[[ $name =~ $system ]] && continue
		[ -e "$D/lib/$name" ] || cp -L "$path" "$D/lib/$name"
	done
done
# the CLI looks in $ORIGIN/../lib, the library in $ORIGIN (both set at link time)
echo "dist: $D ($("$D/bin/stepprof" --version))"
ls -l "$D/bin" "$D/lib"
find "$D/share" -type f | sort
