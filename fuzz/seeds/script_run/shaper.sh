modprobe ifb numifbs=1
ip link set dev ifb0 up
ethtool -K eth0 tso off gso off
sysctl -w net.core.default_qdisc=fq_codel
tc qdisc del dev eth0 root
tc qdisc add dev eth0 root handle 1: htb default 20
tc class add dev eth0 parent 1: classid 1:1 htb rate 10mbit
tc class add dev eth0 parent 1:1 classid 1:10 htb rate 2mbit ceil 10mbit
tc class add dev eth0 parent 1:1 classid 1:20 htb rate 8mbit ceil 10mbit
tc qdisc add dev eth0 parent 1:10 fq_codel
tc filter add dev eth0 parent 1: protocol ip u32 match ip dport 22 0xffff flowid 1:10
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0
$TC qdisc add dev ifb0 root cake bandwidth 20mbit
iptables -t mangle -A POSTROUTING -o eth0 -p tcp --dport 80 -j CLASSIFY --set-class 1:20
