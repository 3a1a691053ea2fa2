#!/usr/bin/env python3
"""ns-3 beside the kernel and tclab: the f10 lab of docs/KERNEL_VS_SIM.md ("The ns-3 gap", issue 27).

A client sends 4 bulk CUBIC flows to a server through a router whose link to the server is 10 Mbit/s
with a 10-packet DropTail queue; the other link is fast (10 Gbit/s), both 10 us each way, as the
veths of crates/cli/tests/kernel_vs_sim.rs. A ping every 100 ms rides along. Prints one line with
goodput, the queue's drops and average backlog (sampled every 10 ms), retransmissions, recovery and
loss episodes (ns-3's congestion-state trace) and ping percentiles.

Run (not run by CI; ns-3 3.44 from PyPI; about 2 minutes a run, most of it cppyy compiling ns-3's
headers):
    python3 -m venv /tmp/ns3-venv && /tmp/ns3-venv/bin/pip install ns3==3.44.post0
    /tmp/ns3-venv/bin/python scripts/ns3/bufferbloat_fifo.py [--seconds 20] [--run 1]

As close to Linux's defaults as ns-3 allows (ns-3's own defaults in brackets):
- TcpCubic (HyStart on, fast convergence, TCP-friendliness), SACK, timestamps, window scaling, PRR;
  SegmentSize 1448 [536]; InitialCwnd 10; MinRto 200 ms [1 s]; DelAckCount 2, DelAckTimeout 40 ms
  [200 ms]; buffers 6 MB [128 KB], so the window is never the limit.
- No RACK-TLP (RFC 6675 loss recovery only), no TSO, no pacing, no receive-window autotuning,
  no TCP small queues, no undo: what ns-3's TcpSocketBase does not have.
- The queue: no queue disc on the bottleneck, the device's DropTailQueue of 10 packets (the packet
  on the wire not counted, as a pfifo's dequeued packet is not); its rate 10 Mbit/s × 1502/1514 so
  that a 1500-byte packet (+2 bytes PPP) takes the 1.2112 ms a 1514-byte Ethernet frame takes through
  the kernel's HTB. The ping (98 bytes with Ethernet) is 86 bytes here: a smaller share of the queue.
"""
from ns import ns

import lab

ns.cppyy.cppdef(
    r"""
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/internet-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"
using namespace ns3;

// What the traces count: the device queue's backlog every 10 ms, recovery and loss episodes
// (TcpSocketState congestion-state transitions into CA_RECOVERY / CA_LOSS), retransmissions.
struct Tally {
    uint64_t samples = 0, backlogSum = 0, recoveries = 0, losses = 0, retrans = 0, forwarded = 0;
};
static Tally g_tally;
static Ptr<Queue<Packet>> g_queue;

void SampleBacklog(Time every) {
    g_tally.samples++;
    g_tally.backlogSum += g_queue->GetNPackets();
    Simulator::Schedule(every, &SampleBacklog, every);
}
// The DropTail's drops: a full device queue stops its transmit queue (flow control) and the traffic
// control layer, with no queue disc, drops the packet before the device. Counted as the packets the
// router forwards towards the server less those the device queue took.
void OnForward(const Ipv4Header& h, Ptr<const Packet>, uint32_t) {
    if (h.GetDestination() == Ipv4Address("10.0.2.2")) g_tally.forwarded++;
}
void StartSampler(Ptr<NetDevice> dev, Time every) {
    g_queue = DynamicCast<PointToPointNetDevice>(dev)->GetQueue();
    dev->GetNode()->GetObject<Ipv4L3Protocol>()->TraceConnectWithoutContext(
        "UnicastForward", MakeCallback(&OnForward));
    Simulator::Schedule(every, &SampleBacklog, every);
}
void OnCongState(TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to) {
    if (to == TcpSocketState::CA_RECOVERY && from != to) g_tally.recoveries++;
    if (to == TcpSocketState::CA_LOSS && from != to) g_tally.losses++;
}
void OnRetrans(Ptr<const Packet>, const TcpHeader&, const Address&, const Address&,
               Ptr<const TcpSocketBase>) {
    g_tally.retrans++;
}
// BulkSend creates its socket at start: connect the socket's traces once it exists.
void HookSocket(Ptr<BulkSendApplication> app) {
    Ptr<Socket> s = app->GetSocket();
    s->TraceConnectWithoutContext("CongState", MakeCallback(&OnCongState));
    s->TraceConnectWithoutContext("Retransmission", MakeCallback(&OnRetrans));
}
void ScheduleHook(Ptr<Application> app, Time at) {
    Simulator::Schedule(at, &HookSocket, DynamicCast<BulkSendApplication>(app));
}
// Ping RTTs, from the Ping application's "Rtt" trace.
static std::vector<double> g_rtts;
void OnRtt(uint16_t, Time rtt) { g_rtts.push_back(rtt.GetSeconds() * 1e3); }
void HookPing(Ptr<Application> app) {
    app->TraceConnectWithoutContext("Rtt", MakeCallback(&OnRtt));
}
uint64_t TallyField(int i) {
    switch (i) {
    case 0: return g_tally.samples;
    case 1: return g_tally.backlogSum;
    case 2: return g_tally.recoveries;
    case 3: return g_tally.losses;
    case 4: return g_tally.retrans;
    default: return g_tally.forwarded - g_queue->GetTotalReceivedPackets();
    }
}
size_t RttCount() { return g_rtts.size(); }
double RttAt(size_t i) { return g_rtts[i]; }
"""
)


def main():
    a = lab.arguments(__doc__, seconds=20.0, flows=4)
    lab.linux_tcp(ns, a.run)

    nodes = ns.NodeContainer()
    nodes.Create(3)  # client, router, server
    fast = ns.PointToPointHelper()
    fast.SetDeviceAttribute("DataRate", ns.StringValue("10Gbps"))
    fast.SetChannelAttribute("Delay", ns.StringValue("10us"))
    slow = ns.PointToPointHelper()
    slow.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(round(10e6 * 1502 / 1514))))
    slow.SetChannelAttribute("Delay", ns.StringValue("10us"))
    slow.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue("10p"))
    d_cr = fast.Install(nodes.Get(0), nodes.Get(1))
    d_rs = slow.Install(nodes.Get(1), nodes.Get(2))

    ns.InternetStackHelper().InstallAll()
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.1.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(d_cr)
    addr.SetBase(ns.Ipv4Address("10.0.2.0"), ns.Ipv4Mask("255.255.255.0"))
    server_if = addr.Assign(d_rs)
    # No queue disc on the bottleneck (Assign put ns-3's default one there): the device's DropTail
    # queue is the only queue.
    ns.TrafficControlHelper().Uninstall(d_rs.Get(0))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    stop = ns.Seconds(a.seconds)
    sink_apps, senders = lab.bulk_streams(
        ns, nodes.Get(0), nodes.Get(2), server_if.GetAddress(1), a.flows, stop
    )
    for app, start in senders:
        ns.cppyy.gbl.ScheduleHook(app, start + ns.NanoSeconds(1))
    ns.cppyy.gbl.HookPing(lab.ping(ns, nodes.Get(0), server_if.GetAddress(1), stop).Get(0))
    ns.cppyy.gbl.StartSampler(d_rs.Get(0), ns.MilliSeconds(10))

    ns.Simulator.Stop(stop)
    ns.Simulator.Run()

    received = lab.received(ns, sink_apps)
    q = ns.DynamicCast[ns.PointToPointNetDevice](d_rs.Get(0)).GetQueue()
    t = [ns.cppyy.gbl.TallyField(i) for i in range(6)]
    rtts = sorted(ns.cppyy.gbl.RttAt(i) for i in range(ns.cppyy.gbl.RttCount()))
    pct = lambda p: rtts[max(0, -(-len(rtts) * p // 100) - 1)] if rtts else 0.0
    print(
        f"run {a.run}: goodput {received * 8 / a.seconds / 1e6:.4f} Mbit/s, "
        f"drops {q.GetTotalDroppedPackets() + t[5]}, backlog {t[1] / max(t[0], 1):.2f} packets, "
        f"retransmits {t[4]}, recoveries {t[2]}, loss (RTO) episodes {t[3]}, "
        f"ping p50 {pct(50):.1f} ms p90 {pct(90):.1f} ms ({len(rtts)} answered)"
    )
    ns.Simulator.Destroy()


if __name__ == "__main__":
    main()
