#!/bin/bash
# t0335-storage-folders.sh -- storage/ is four modules in four folders, each
# owning one thing (issue 33 item 3, docs/ARCHITECTURE.md "storage/: four
# owners"): git/ the bare repos, lfs/ the LFS store and its backends, db/ the
# database by table, publish/ the one publish path and the one importer.
# Every storage file lives in one of them; every header is either a
# folder's API or private to it (db_internal.h, lfs_backend.h, ...: included
# from its own folder only); a folder includes only the folders below it
# (lfs < git < db < publish); and each function a folder's headers declare
# is defined in that folder.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

# folder | its API headers | its private headers | the storage folders it may include
TABLE='
lfs|lfs.h|lfs_backend.h|
git|repo.h||lfs
db|db.h db_builds.h variant_index.h webhooks.h|db_internal.h migrations.h|git
publish|publish.h|publish_stage.h|git lfs db
'
# Unit tests that test a folder's insides through its private header.
PRIVATE_OK='tests/unit/test_db_pins.c tests/unit/test_db_row_read.c tests/unit/test_publish.c'
folders=$(echo "$TABLE" | awk -F'|' 'NF > 1 { print $1 }' | sort | tr '\n' ' ')

hits=$(find storage -maxdepth 1 -type f \( -name '*.[ch]' -o -name '*.sh' \) | sort)
is "$hits" "" "no source file at the top of storage/: each lives in its folder"
have=$(find storage -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | grep -v '^\.' | sort | tr '\n' ' ')
is "$have" "$folders" "storage/ holds the folders $folders"

while IFS='|' read -r dir api private deps; do
	[ -n "$dir" ] || continue
	known=" $api $private "
	unknown=$(for h in storage/"$dir"/*.h; do [ -e "$h" ] || continue
		case "$known" in *" ${h##*/} "*) ;; *) echo "$h" ;; esac; done)
	is "$unknown" "" "storage/$dir/: every header is its API ($api) or private to it${private:+ ($private)}"
	for h in $private; do
		hits=$(grep -rln --include='*.[ch]' --exclude-dir=build-deb "#include \"storage/$dir/$h\"" . 2>/dev/null |
			sed 's|^\./||' | grep -v "^storage/$dir/" | grep -vxF -f <(echo "$PRIVATE_OK" | tr ' ' '\n'))
		is "$hits" "" "storage/$dir/$h is included from storage/$dir/ only"
	done
	reached=$(grep -rhoE '#include "storage/[a-z_]+/' storage/"$dir" | sed 's|.*storage/||; s|/$||' |
		grep -vx "$dir" | sort -u | tr '\n' ' ')
	want=$(echo $deps | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
	extra=$(comm -23 <(echo "$reached" | tr ' ' '\n' | grep .) <(echo "$want" | tr ' ' '\n' | grep .) | tr '\n' ' ')
	is "$extra" "" "storage/$dir/ includes only the storage folders below it (${deps:-none})"
done <<<"$TABLE"

# Each function a header declares (a line at column 0 naming it before its
# parameters) is defined (the same, without a ';' on the line) in a .c file
# of the header's folder.
FN='^[a-z][a-z0-9_ *]*[ *]\**[a-z_][a-z0-9_]*\('
declared() { grep -hE "$FN" "$@" | grep -v '^\(static\|typedef\|extern\)' | sed -E 's/\(.*//; s/.*[ *]//' | sort -u; }
defined() { grep -hE "$FN([^;]*\$|.*\{)" "$@" | sed -E 's/\(.*//; s/.*[ *]//' | sort -u; }
total=0
for dir in $folders; do
	decl=$(declared storage/"$dir"/*.h)
	def=$(defined storage/"$dir"/*.c)
	total=$((total + $(echo "$decl" | grep -c .)))
	missing=$(comm -23 <(echo "$decl") <(echo "$def") | tr '\n' ' ')
	is "$missing" "" "every function storage/$dir/'s headers declare is defined in storage/$dir/"
done
ok $([ "$total" -gt 200 ]; echo $?) "the declarations were found ($total functions declared in storage/*/*.h)"

# The counter above sees a declaration without its definition.
tmp=$(mktemp -d)
printf 'int fake_declared(int a,\n\t\tint b);\nvoid fake_defined(void);\n' >"$tmp/x.h"
printf 'void fake_defined(void)\n{\n}\nint fake_declared(int a, int b);\n' >"$tmp/x.c"
is "$(comm -23 <(declared "$tmp/x.h") <(defined "$tmp/x.c") | tr '\n' ' ')" "fake_declared " \
	"a declared function without a definition is reported"
rm -rf "$tmp"

done_testing
