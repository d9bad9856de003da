#!/usr/bin/env bash
# structure_counts.sh -- the tree's shape in numbers, for before/after notes
# on a structure change: C files and lines per folder, exported functions per
# module (global text symbols of the folder's objects: needs a build), the
# files of each folder that call into another folder, and the counts the boundary
# tests keep at their allowed values (positional row reads and libmicrohttpd
# response calls outside their owners, strcmp on an LFS backend name).
# Run from the top of a built tree: bash tests/tools/structure_counts.sh
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
# storage/ is four modules, counted one by one (docs/ARCHITECTURE.md).
FOLDERS="accounts api common farm http kernel mirror server storage/git storage/lfs storage/db storage/publish sync web builder-worker"
src() { find "$1" -maxdepth 1 -name '*.c' ! -name 'embedded_*' 2>/dev/null | sort; }

printf '%-15s %6s %7s %9s\n' folder files lines exported
for d in $FOLDERS; do
	[ -d "$d" ] || continue
	files=$(src "$d" | wc -l)
	lines=$(src "$d" | xargs -r cat | wc -l)
	objs=$(find "$d" -maxdepth 1 -name '*.o' ! -name '*-*' 2>/dev/null)
	exported=-
	[ -n "$objs" ] && exported=$(nm -g --defined-only $objs 2>/dev/null | awk '$2 == "T" { print $3 }' | sort -u | wc -l)
	printf '%-15s %6d %7d %9s\n' "$d" "$files" "$lines" "$exported"
done

echo
echo "# calls between folders (from -> to: the from folder's files that call a function defined in the to folder)"
for d in $FOLDERS; do
	for o in $(find "$d" -maxdepth 1 -name '*.o' ! -name '*-*' 2>/dev/null); do
		nm -g --defined-only "$o" | awk -v d="$d" '$2 == "T" { print "D", $3, d }'
	done
done >/tmp/structure_syms.$$
for d in $FOLDERS; do
	for o in $(find "$d" -maxdepth 1 -name '*.o' ! -name '*-*' 2>/dev/null | sort); do
		nm -u "$o" | awk -v f="$o" '{ print "U", $2, f }'
	done
done >>/tmp/structure_syms.$$
awk '$1 == "D" { home[$2] = $3; next }
	$1 == "U" && ($2 in home) { d = $3; sub(/\/[^\/]*$/, "", d); if (d != home[$2]) pair[d " -> " home[$2], $3] = 1 }
	END { for (k in pair) { split(k, q, SUBSEP); n[q[1]]++ } for (k in n) printf "%s: %d\n", k, n[k] }' \
	/tmp/structure_syms.$$ | sort
rm -f /tmp/structure_syms.$$

echo
echo "# boundary counts"
outside() { grep -rn --include='*.c' "$1" $(echo "$FOLDERS" | tr ' ' '\n' | grep -v "^$2\(/\|\$\)") 2>/dev/null | grep -v 'embedded_' | wc -l; }
echo "db_rows_get outside storage/: $(outside 'db_rows_get(' storage)"
echo "_COL_ reads outside storage/: $(outside '_COL_' storage)"
echo "MHD response calls outside http/: $(outside 'MHD_create_response\|MHD_queue_response\|MHD_add_response_header' http)"
echo "strcmp on an LFS backend name: $(grep -rn --include='*.c' 'strcmp([^)]*lfs_backend' $FOLDERS 2>/dev/null | wc -l)"
