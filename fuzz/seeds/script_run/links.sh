ip link add ifb1 type ifb
ip link set dev ifb1 mtu 1400 txqueuelen 500 up
ifconfig eth1 mtu 9000 txqueuelen 2000 up
/sbin/tc qdisc add dev eth1 root tbf rate 1mbit burst 10k latency 50ms
sudo tc qdisc change dev eth1 root tbf rate 2mbit burst 10k latency 50ms
command tc -s qdisc show dev eth1
ip link del ifb1
rmmod ifb
ip route add default via 192.0.2.1
ip6tables -t mangle -F
