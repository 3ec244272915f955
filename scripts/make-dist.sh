#!/usr/bin/env bash
# make-dist.sh BUILD DEST - a self-contained stepprof: DEST/bin/stepprof, DEST/lib/libstepprof.so (and
# libstepprof-nomalloc.so, the same without the malloc hooks) and
# every non-system library they need (found through $ORIGIN rpaths), for machines without the -dev
# packages (the GPU machine). System libraries (glibc, libgcc, libstdc++) are not copied.
set -euo pipefail
B=${1:-build} D=${2:-dist/stepprof}
rm -rf "$D" && mkdir -p "$D/bin" "$D/lib" "$D/share"
cp "$B/stepprof" "$D/bin/" && cp "$B/libstepprof.so" "$B/libstepprof-nomalloc.so" "$D/lib/"
cp scripts/demo.sh "$D/share/" 2>/dev/null || true
system='^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libgcc_s|libstdc\+\+)'
for f in "$D/bin/stepprof" "$D/lib/libstepprof.so"; do
	ldd "$f" | awk '/=> \//{print $1, $3}' | while read -r name path; do
		[[ $name =~ $system ]] && continue
		[ -e "$D/lib/$name" ] || cp -L "$path" "$D/lib/$name"
	done
done
# the CLI looks in $ORIGIN/../lib, the library in $ORIGIN (both set at link time)
echo "dist: $D"; ls -l "$D/bin" "$D/lib"
