# Lab h1's namespaces for lab.sh and ss.sh (sourced; $P the prefix, $D the output dir, $N the run):
# $P-c, $P-r, $P-s joined by veths with gso_max_segs 1, HTB 10mbit on the router's r1, iperf3's server
# at chrt -f 20 (one test, its report in $D/r$N.srv.json). The namespaces go when the script exits.
C=$P-c; R=$P-r; S=$P-s
cleanup() { for ns in $C $R $S; do ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null; done; sleep 0.3; for ns in $C $R $S; do ip netns del $ns 2>/dev/null; done; }
trap cleanup EXIT
lab_up() {
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
}
