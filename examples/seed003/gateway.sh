#!/bin/bash
# Seed 003's home-gateway policy (Julien Vehent, "Journey to the Center of the Linux Kernel: Traffic
# Control, Shaping and QoS", section "A home gateway policy"). The seed quotes the SSH section and the
# mark-propagation rule verbatim; they are reproduced here as printed, the article's `-dport 22` typo
# included (Linux's iptables rejects that line with "Bad argument `22'", and so does tclab). The other
# classes are rebuilt from what the seed prints of the script's run: its log (ids, rates, ceils, leaf
# qdiscs, which rule marks what) and its `tc -d qdisc show` / `tc -s class show` listings (r2q 40,
# default 999, pfifo limit 10, sfq limit 32 perturb 10, 1:400 prio 4 burst 30k).

NETCARD=${1:-eth0}
UPLINK=1600
TC=/sbin/tc
IPT=/sbin/iptables

echo "#-cleanup"
$TC qdisc del dev $NETCARD root
$IPT -t mangle -F

echo "#-define a HTB root qdisc"
$TC qdisc add dev $NETCARD root handle 1: htb default 999 r2q 40

echo "#--uplink - rate $UPLINK kbit ceil $UPLINK kbit"
$TC class add dev $NETCARD parent 1:0 classid 1:1 htb rate ${UPLINK}kbit ceil ${UPLINK}kbit

echo "#---interactive - id 100 - rate $(( UPLINK / 10 )) kbit ceil $UPLINK kbit"
$TC class add dev $NETCARD parent 1:1 classid 1:100 htb \
    rate $(( UPLINK / 10 ))kbit ceil ${UPLINK}kbit burst 5k prio 1
echo "#--- ~ sub interactive: pfifo"
$TC qdisc add dev $NETCARD parent 1:100 handle 1100: pfifo limit 10
echo "#--- ~ interactive filter"
$TC filter add dev $NETCARD parent 1:0 protocol ip prio 1 handle 100 fw flowid 1:100
echo "#--- ~ netfilter rule - all UDP traffic at 100"
$IPT -t mangle -A POSTROUTING -o $NETCARD -p udp -j CONNMARK --set-mark 100

echo "#---tcp acks - id 200 - rate $(( UPLINK / 5 )) kbit ceil $UPLINK kbit"
$TC class add dev $NETCARD parent 1:1 classid 1:200 htb \
    rate $(( UPLINK / 5 ))kbit ceil ${UPLINK}kbit burst 15k prio 2
echo "#--- ~ sub tcp acks: pfifo"
$TC qdisc add dev $NETCARD parent 1:200 handle 1200: pfifo limit 10
echo "#--- ~ filtre tcp acks"
$TC filter add dev $NETCARD parent 1:0 protocol ip prio 2 handle 200 fw flowid 1:200
echo "#--- ~ netfilter rule for TCP ACKs will be loaded at the end"

# SSH class: for outgoing connections to
# avoid lag when somebody else is downloading
# however, an SSH connection cannot fill up
# the connection to more than 70%
echo "#---ssh - id 300 - rate 160 kbit ceil 1120 kbit"
/sbin/tc class add dev eth0 parent 1:1 classid 1:300 htb \
    rate 160kbit ceil 1120kbit burst 15k prio 3

# SFQ will mix the packets if there are several
# SSH connections in parallel
# and ensure that none has the priority
echo "#--- ~ sub ssh: sfq"
/sbin/tc qdisc add dev eth0 parent 1:300 handle 1300: \
    sfq perturb 10 limit 32

echo "#--- ~ ssh filter"
/sbin/tc filter add dev eth0 parent 1:0 protocol ip \
    prio 3 handle 300 fw flowid 1:300

echo "#--- ~ netfilter rule - SSH at 300"
/sbin/iptables -t mangle -A POSTROUTING -o eth0 -p tcp --tcp-flags SYN SYN -dport 22 -j CONNMARK \
    --set-mark 300

echo "#---http branch - id 400 - rate $(( UPLINK / 2 )) kbit ceil $UPLINK kbit"
$TC class add dev $NETCARD parent 1:1 classid 1:400 htb \
    rate $(( UPLINK / 2 ))kbit ceil ${UPLINK}kbit burst 30k prio 4
echo "#--- ~ sub http branch: sfq"
$TC qdisc add dev $NETCARD parent 1:400 handle 1400: sfq perturb 10 limit 32
echo "#--- ~ http branch filter"
$TC filter add dev $NETCARD parent 1:0 protocol ip prio 4 handle 400 fw flowid 1:400
echo "#--- ~ netfilter rule - http/s"
for port in 80 443; do
    $IPT -t mangle -A POSTROUTING -o $NETCARD -p tcp --tcp-flags SYN SYN --dport $port \
        -j CONNMARK --set-mark 400
done

echo "#---default - id 999 - rate $(( UPLINK / 10 ))kbit ceil ${UPLINK}kbit"
$TC class add dev $NETCARD parent 1:1 classid 1:999 htb \
    rate $(( UPLINK / 10 ))kbit ceil ${UPLINK}kbit burst 2k prio 9
echo "#--- ~ sub default: sfq"
$TC qdisc add dev $NETCARD parent 1:999 handle 1999: sfq perturb 10 limit 32
echo "#--- ~ filtre default"
$TC filter add dev $NETCARD parent 1:0 protocol ip prio 99 handle 999 fw flowid 1:999
# long transfers (more than 10 MB both ways) leave the HTTP class for the default one
$IPT -t mangle -A POSTROUTING -o $NETCARD -p tcp -m connbytes --connbytes 10000000: \
    --connbytes-dir both --connbytes-mode bytes -j CONNMARK --set-mark 999

echo "#--- ~ propagating marks on connections"
iptables -t mangle -A POSTROUTING -j CONNMARK --restore-mark

echo "#--- ~ Mark TCP ACKs flags at 200"
$IPT -t mangle -A POSTROUTING -p tcp --tcp-flags URG,ACK,PSH,RST,SYN,FIN ACK \
    -m length --length 40:64 -j MARK --set-mark 200

echo
echo "Traffic Control is up and running"
