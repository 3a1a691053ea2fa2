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
- TCP as close to Linux's as ns-3 allows (scripts/ns3/lab.py: CUBIC, MSS 1448, initial window 10,
  SACK, MinRto 200 ms, delayed ACKs 2 / 40 ms, 6 MB buffers; what ns-3's TCP lacks is listed
  there); the streams start within the first 10 ms.
"""
import time

from ns import ns

import lab


def main():
    a = lab.arguments(__doc__, seconds=60.0, flows=30)
    lab.linux_tcp(ns, a.run)

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

    stop = ns.Seconds(a.seconds)
    sink_apps, _ = lab.bulk_streams(
        ns, nodes.Get(0), nodes.Get(2), server_if.GetAddress(1), a.flows, stop
    )
    lab.ping(ns, nodes.Get(0), server_if.GetAddress(1), stop)

    ns.Simulator.Stop(stop)
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    received = lab.received(ns, sink_apps)
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
