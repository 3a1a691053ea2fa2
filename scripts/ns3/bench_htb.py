#!/usr/bin/env python3
"""ns-3's side of the simulator benchmark (issue 26): tclab's built-in `bench-htb` in ns-3 3.44.

60 s of 30 bulk TCP streams from a client through a router to a server, shaped to 100 Mbit/s on the
router's link to the server, a ping every 100 ms alongside. Prints the wall and CPU time of
Simulator::Run() alone (building the network and cppyy's compilation of ns-3's headers are not
counted), the events ns-3 executed, the TCP goodput and the ping's answers, to set beside
`cargo bench -p tclab-sim -- htb` (docs/BENCHMARKS.md, "tclab against ns-3").

Run (not run by CI; ns-3 3.44 from PyPI; the import takes a minute or two, cppyy compiling ns-3's
headers):
    python3 -m venv /tmp/ns3-venv && /tmp/ns3-venv/bin/pip install ns3==3.44.post0
    /tmp/ns3-venv/bin/python scripts/ns3/bench_htb.py [--seconds 60] [--run 1]

The same network as `tclab sim --show bench-htb`, as far as ns-3 has its parts:
- client-router 1 Gbit/s 1 ms, router-server 1 Gbit/s 4 ms (point-to-point links).
- The shaper: ns-3 has no HTB. bench-htb sends everything to its default class 1:10 (rate 60mbit,
  ceil 100mbit under 1:1's 100mbit, burst and cburst 1600 bytes as tc computes them, a pfifo of
  1000 packets), which then behaves as one 100 Mbit/s token bucket of 1600 bytes before a
  1000-packet FIFO: here a TbfQueueDisc with those figures. HTB charges Ethernet frames (1514
  bytes for 1500 of IP), ns-3's queue discs IP packets, so the rate is 100 Mbit/s × 1500/1514:
  the same packets a second, hence the same goodput.
- TCP as in scripts/ns3/bufferbloat_fifo.py (CUBIC, MSS 1448, initial window 10, SACK, MinRto
  200 ms, delayed ACKs 2 / 40 ms, 6 MB buffers); the streams start within the first 10 ms.
  What ns-3's TCP lacks (RACK-TLP, pacing, TSO, autotuning) is listed there.
"""
import argparse
import time

from ns import ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--run", type=int, default=1, help="ns-3 RngRun (what varies between runs)")
    ap.add_argument("--flows", type=int, default=30)
    a = ap.parse_args()

    ns.RngSeedManager.SetRun(a.run)
    cfg = ns.Config.SetDefault
    cfg("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpCubic"))
    cfg("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    cfg("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    cfg("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    cfg("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.MilliSeconds(40)))
    cfg("ns3::TcpSocket::SndBufSize", ns.UintegerValue(6 << 20))
    cfg("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(6 << 20))
    cfg("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(200)))
    cfg("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))

    nodes = ns.NodeContainer()
    nodes.Create(3)  # client, router, server
    links = []
    for delay in ("1ms", "4ms"):
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue("1Gbps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue(delay))
        links.append(p2p)
    d_cr = links[0].Install(nodes.Get(0), nodes.Get(1))
    d_rs = links[1].Install(nodes.Get(1), nodes.Get(2))

    ns.InternetStackHelper().InstallAll()
    # The shaper on the router's side of the router-server link, in place of ns-3's default queue
    # disc (installed by Assign otherwise).
    tch = ns.TrafficControlHelper()
    tch.SetRootQueueDisc(
        "ns3::TbfQueueDisc",
        "Rate", ns.DataRateValue(ns.DataRate(round(100e6 * 1500 / 1514))),
        "Burst", ns.UintegerValue(1600),
        "MaxSize", ns.QueueSizeValue(ns.QueueSize("1000p")),
    )
    tch.Install(d_rs.Get(0))
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.1.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(d_cr)
    addr.SetBase(ns.Ipv4Address("10.0.2.0"), ns.Ipv4Mask("255.255.255.0"))
    server_if = addr.Assign(d_rs)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    server = server_if.GetAddress(1)
    port = 5201
    sink = ns.PacketSinkHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
    )
    sink_apps = sink.Install(nodes.Get(2))
    sink_apps.Start(ns.Seconds(0))
    stop = ns.Seconds(a.seconds)
    rng = ns.CreateObject[ns.UniformRandomVariable]()
    for _ in range(a.flows):
        bulk = ns.BulkSendHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(server, port).ConvertTo()
        )
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        app = bulk.Install(nodes.Get(0)).Get(0)
        app.SetStartTime(ns.MicroSeconds(int(rng.GetValue(0, 10000))))
        app.SetStopTime(stop)
    ping = ns.PingHelper(server.ConvertTo())
    ping.SetAttribute("Interval", ns.TimeValue(ns.MilliSeconds(100)))
    ping.SetAttribute("Size", ns.UintegerValue(56))
    ping.SetAttribute("VerboseMode", ns.StringValue("Silent"))
    papps = ping.Install(nodes.Get(0))
    papps.Start(ns.MilliSeconds(1))
    papps.Stop(stop)

    ns.Simulator.Stop(stop)
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    received = sum(
        ns.DynamicCast[ns.PacketSink](sink_apps.Get(i)).GetTotalRx() for i in range(sink_apps.GetN())
    )
    events = ns.Simulator.GetEventCount()
    print(
        f"run {a.run}: Simulator::Run() {wall:.3f} s wall, {cpu:.3f} s CPU for {a.seconds:g} s "
        f"simulated ({a.seconds / cpu:.2f}x real time by CPU), {events} events "
        f"({events / cpu / 1e6:.3f} M events/s by CPU), "
        f"TCP goodput {received * 8 / a.seconds / 1e6:.2f} Mbit/s"
    )
    ns.Simulator.Destroy()


if __name__ == "__main__":
    main()
