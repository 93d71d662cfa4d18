#!/usr/bin/env bash
# Idle CPU of 5-node clusters whose 5 apps (one per node) each campaign in
# ELECTIONS named elections: one cluster per binary, all running at once, so
# each round's figures share the host's load. CPU is utime+stime of every
# electord process from /proc/PID/stat over WINDOW seconds, after SETTLE.
# usage: resend-idle.sh ELECTBENCH LABEL=ELECTORD... (env: ELECTIONS=100
# SETTLE=20 WINDOW=30 ALGO=bully). Hold the bench lock around it.
set -euo pipefail
bench=$1; shift
elections=${ELECTIONS:-100} settle=${SETTLE:-20} window=${WINDOW:-30} algo=${ALGO:-bully}
dir=$(mktemp -d /tmp/resend-idle.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
names=$(seq -f 'jobs-%03g' 0 $((elections - 1)) | paste -sd,)
declare -A nodepids
for spec in "$@"; do
	label=${spec%%=*} bin=${spec#*=} seed=""
	for i in 1 2 3 4 5; do
		api=127.0.0.1:$(freeport) gossip=127.0.0.1:$(freeport)
		args=(--id "$i" --algorithm "$algo" --api-addr "$api" --peer-addr "127.0.0.1:$(freeport)" --gossip-addr "$gossip"
			--http-addr "127.0.0.1:$(freeport)" --data-dir "$dir/$label-$i" --log-level warn)
		[ -n "$seed" ] && args+=(--join "$seed") || seed=$gossip
		"$bin" "${args[@]}" >"$dir/$label-$i.log" 2>&1 &
		pids+=($!) ; nodepids[$label]+="$! "
		echo "$api" >>"$dir/$label.apis"
	done
done
sleep 3 # the nodes listen and join (the apps retry their dial for 30 s anyway)
for spec in "$@"; do
	label=${spec%%=*} i=0
	while read -r api; do
		i=$((i + 1))
		"$bench" app --api "$api" --elections "$names" --value "app-$i" >"$dir/$label-app-$i.log" 2>&1 &
		pids+=($!)
	done <"$dir/$label.apis"
done
sleep "$settle"
cpu() { local t=0; for p in $1; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }
declare -A before
for spec in "$@"; do label=${spec%%=*}; before[$label]=$(cpu "${nodepids[$label]}"); done
sleep "$window"
hz=$(getconf CLK_TCK)
for spec in "$@"; do
	label=${spec%%=*}
	after=$(cpu "${nodepids[$label]}")
	ready=$(grep -l '^ready' "$dir/$label"-app-*.log | wc -l)
	echo "$label (pids ${nodepids[$label]}, jiffies $((after - ${before[$label]}))): $(awk -v a="$after" -v b="${before[$label]}" -v hz="$hz" -v w="$window" 'BEGIN{printf "%.2f", (a-b)/hz/w*100/5}')% of a core per node (mean of 5), apps ready $ready/5, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
