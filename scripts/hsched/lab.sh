#!/bin/bash
# One run of docs/KERNEL_VS_SIM.md's lab h1 in namespaces $P-c, $P-r, $P-s (P=hs unless set; removed on exit): HTB 10mbit
# on r1, iperf3 -C bbr for 8 s at chrt -f 20, a ping, tcpdump (ns timestamps) on s0 and c0. Needs root.
# Usage: lab.sh N [DIR]  (writes DIR/rN.*; DIR defaults to /tmp/hs-meas). Analyse with analyse.py.
set -u
N=$1; D=${2:-/tmp/hs-meas}; mkdir -p $D
P=${P:-hs}; . "$(dirname "$0")/netns.sh"
lab_up
sleep 0.3
ip netns exec $S timeout 15 tcpdump -i s0 -s 96 -w $D/r$N.s0.pcap --time-stamp-precision nano -n 2>/dev/null &
ip netns exec $C timeout 15 tcpdump -i c0 -s 96 -w $D/r$N.c0.pcap --time-stamp-precision nano -n 2>/dev/null &
sleep 1
ip netns exec $C timeout 12 ping -n -i 0.1 -w 8 10.0.2.2 > $D/r$N.ping &
ip netns exec $C chrt -f 20 timeout 15 iperf3 -c 10.0.2.2 -t 8 -C bbr -J > $D/r$N.cli.json
sleep 1.5
ip netns pids $S | xargs -r kill -INT 2>/dev/null; ip netns pids $C | xargs -r kill -INT 2>/dev/null
sleep 0.5
uptime > $D/r$N.load
