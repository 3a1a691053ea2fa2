#!/bin/bash
# One run of docs/KERNEL_VS_SIM.md's lab h1 in namespaces hb-c, hb-r, hb-s (removed on exit), as lab.sh
# but with no tcpdump: the BBR sender's `ss -tin` (bw estimate, pacing gain, cwnd, unacked) about every
# 30 ms instead, to follow its regime through the run. Needs root. Usage: ss.sh N [DIR] (writes DIR/rN.ss,
# rN.ping, rN.cli.json; DIR defaults to /tmp/hb-meas).
set -u
N=$1; D=${2:-/tmp/hb-meas}; mkdir -p $D
P=hb; . "$(dirname "$0")/netns.sh"
lab_up
sleep 0.5
ip netns exec $C timeout 12 ping -n -i 0.1 -w 8 10.0.2.2 > $D/r$N.ping &
# 'T <epoch>' then the socket lines, per sample.
( end=$((SECONDS + 10)); while [ $SECONDS -lt $end ]; do
    echo "T $(date +%s.%N)"; ip netns exec $C ss -tin dst 10.0.2.2 dport = 5201; sleep 0.01
  done ) > $D/r$N.ss 2>/dev/null &
ip netns exec $C chrt -f 20 timeout 15 iperf3 -c 10.0.2.2 -t 8 -C bbr -J > $D/r$N.cli.json
sleep 0.5
