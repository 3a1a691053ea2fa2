#!/bin/bash
# One run of docs/KERNEL_VS_SIM.md's lab h1 in namespaces hb-c, hb-r, hb-s (removed on exit), as lab.sh
# but with no tcpdump: the BBR sender's `ss -tin` (bw estimate, pacing gain, cwnd, unacked) about every
# 30 ms instead, to follow its regime through the run. Needs root. Usage: ss.sh N [DIR] (writes DIR/rN.ss,
# rN.ping, rN.cli.json; DIR defaults to /tmp/hb-meas).
set -u
N=$1; D=${2:-/tmp/hb-meas}; mkdir -p $D
C=hb-c; R=hb-r; S=hb-s
cleanup() { for ns in $C $R $S; do ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null; done; sleep 0.3; for ns in $C $R $S; do ip netns del $ns 2>/dev/null; done; }
trap cleanup EXIT
cleanup
for ns in $C $R $S; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add c0 netns $C gso_max_segs 1 type veth peer name r0 netns $R gso_max_segs 1
ip link add r1 netns $R gso_max_segs 1 type veth peer name s0 netns $S gso_max_segs 1
ip -n $C addr add 10.0.1.1/24 dev c0; ip -n $R addr add 10.0.1.2/24 dev r0
ip -n $R addr add 10.0.2.1/24 dev r1; ip -n $S addr add 10.0.2.2/24 dev s0
for x in "$C c0" "$R r0" "$R r1" "$S s0"; do set -- $x; ip -n $1 link set $2 up; done
ip -n $C route add default via 10.0.1.2; ip -n $S route add default via 10.0.2.1
ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
tc -n $R qdisc add dev r1 root handle 1: htb default 10
tc -n $R class add dev r1 parent 1: classid 1:10 htb rate 10mbit ceil 10mbit
ip netns exec $C ping -c 1 -W 1 10.0.2.2 >/dev/null
ip netns exec $S chrt -f 20 timeout 20 iperf3 -s -1 -J > $D/r$N.srv.json &
sleep 0.5
ip netns exec $C timeout 12 ping -n -i 0.1 -w 8 10.0.2.2 > $D/r$N.ping &
# 'T <epoch>' then the socket lines, per sample.
( end=$((SECONDS + 10)); while [ $SECONDS -lt $end ]; do
    echo "T $(date +%s.%N)"; ip netns exec $C ss -tin dst 10.0.2.2 dport = 5201; sleep 0.01
  done ) > $D/r$N.ss 2>/dev/null &
ip netns exec $C chrt -f 20 timeout 15 iperf3 -c 10.0.2.2 -t 8 -C bbr -J > $D/r$N.cli.json
sleep 0.5
