#!/bin/sh
# sidebyside.sh measures the target rows of docs/BENCHMARKS.md (4 × 16 and
# idle, grpc and lf) with two peerbench binaries in one run, so that both
# see the same machine at the same time:
#
#	cmd/peerbench/sidebyside.sh OLD NEW [PAIRS]
#
# It runs OLD, NEW, OLD, NEW, ... (PAIRS pairs, default 5), each as
# `<binary> --runs 1 --shapes 4x16,idle --kinds grpc,lf --out FILE` (about
# 11 s a run), prints every run's raw rows, then per binary the median and
# the min–max of QPS and server CPU per call (4 × 16) and of RSS and heap
# per idle connection. The spread of one binary's runs is the noise a
# difference between the binaries has to exceed.
#
# PEERBENCH_ARGS adds flags to every run, e.g. PEERBENCH_ARGS=--tls for the
# peer port's mutual TLS on both servers. OLD and NEW may be one binary, to
# see the two kinds side by side with the noise of repeated runs.
#
# Build the binaries first, e.g.
#
#	git worktree add /tmp/old OLDCOMMIT && (cd /tmp/old && go build -o /tmp/pb-old ./cmd/peerbench)
#	go build -o /tmp/pb-new ./cmd/peerbench
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 OLD NEW [PAIRS]" >&2
	exit 2
fi
old=$1
new=$2
pairs=${3:-5}
args="--runs 1 --shapes 4x16,idle --kinds grpc,lf${PEERBENCH_ARGS:+ $PEERBENCH_ARGS}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "command: $0 $*"
echo "each run: <binary> $args --out FILE"
echo "old: $old ($(cksum <"$old" | cut -d' ' -f1)), new: $new ($(cksum <"$new" | cut -d' ' -f1))"
echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(uptime)"
echo
echo "Raw rows (columns: run, shape, kind, calls, QPS, p50 µs, p99 µs, p99.9 µs, srv CPU µs/call, srv core,"
echo "srv wait, cli core, cli wait, load, errors, dropped, RSS B/conn, heap B/conn, stack B/conn, failure):"
echo
i=1
while [ "$i" -le "$pairs" ]; do
	for b in old new; do
		if [ "$b" = old ]; then bin=$old; else bin=$new; fi
		f="$tmp/$b-$i.md"
		echo "=== $b $i"
		if ! "$bin" $args --out "$f" >"$tmp/log" 2>&1; then
			echo "run failed:"
			cat "$tmp/log"
			continue
		fi
		grep -E '^\| 1 \| (4x16|idle) \|' "$f"
		# binary shape kind QPS CPU/call RSS heap pair
		grep -E '^\| 1 \| (4x16|idle) \|' "$f" |
			awk -F'|' -v b="$b" -v i="$i" '
			function f(x) { return x == "" ? "-" : x }
			{ gsub(/ /, ""); print b, $3, $4, f($6), f($10), f($18), f($19), i }' >>"$tmp/rows"
	done
	i=$((i + 1))
done
echo
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(uptime)"
echo

# summary SHAPE COL NAME: per binary and kind, the median and min–max of
# column COL of the rows of SHAPE, and the spread
# (max − min) / median.
summary() {
	awk -v shape="$1" -v col="$2" '$2 == shape && $col != "-" { print $1, $3, $col }' "$tmp/rows" |
		sort -k1,1r -k2,2 -k3,3g |
		awk -v name="$3" '
		function flush() {
			if (n == 0) return
			med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			f = (med < 10) ? "%.3f" : "%.1f"
			printf "| %s | %s | %s | %d | " f " | " f "–" f " | %.1f%% |\n", name, key1, key2, n, med, v[1], v[n], med ? 100 * (v[n] - v[1]) / med : 0
			n = 0
		}
		{ k = $1 " " $2; if (k != last) { flush(); last = k; key1 = $1; key2 = $2 } v[++n] = $3 }
		END { flush() }'
}

# The lf/grpc ratios of each run, as rows of kind "lf/grpc": both kinds of a
# run share the machine's load of the moment, so the ratio moves less.
awk '$3 == "grpc" { g[$1, $2, $8] = $0 }
	$3 == "lf" { lf[$1, $2, $8] = $0 }
	END {
		for (k in lf) {
			if (!(k in g)) continue
			split(lf[k], a, " "); split(g[k], b, " ")
			r4 = (a[4] != "-" && b[4] > 0) ? a[4] / b[4] : "-"
			r5 = (a[5] != "-" && b[5] > 0) ? a[5] / b[5] : "-"
			r6 = (a[6] != "-" && b[6] > 0) ? a[6] / b[6] : "-"
			r7 = (a[7] != "-" && b[7] > 0) ? a[7] / b[7] : "-"
			print a[1], a[2], "lf/grpc", r4, r5, r6, r7, a[8]
		}
	}' "$tmp/rows" >"$tmp/ratios"
cat "$tmp/ratios" >>"$tmp/rows"

echo "| figure | binary | kind | runs | median | min–max | spread (max−min)/median |"
echo "|---|---|---|---|---|---|---|"
summary 4x16 4 "4x16 QPS"
summary 4x16 5 "4x16 srv CPU µs/call"
summary idle 6 "idle RSS B/conn"
summary idle 7 "idle heap B/conn"
