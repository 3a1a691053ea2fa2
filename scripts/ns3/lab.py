"""What the ns-3 scripts beside tclab share: their command line, TCP set as close to Linux's defaults
as ns-3 allows, bulk TCP streams into one sink, and a ping.

Linux's defaults against ns-3's own (in brackets): TcpCubic (HyStart on, fast convergence,
TCP-friendliness), SACK, timestamps, window scaling, PRR; SegmentSize 1448 [536]; InitialCwnd 10;
MinRto 200 ms [1 s]; DelAckCount 2, DelAckTimeout 40 ms [200 ms]; buffers 6 MB [128 KB], so the
window is never the limit. ns-3 has no RACK-TLP, TSO, pacing, receive-window autotuning, TCP small
queues or undo.
"""
import argparse


def arguments(doc, seconds, flows):
    """The scripts' options: --seconds, --run (ns-3's RngRun, what varies between runs), --flows."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--run", type=int, default=1, help="ns-3 RngRun (what varies between runs)")
    ap.add_argument("--flows", type=int, default=flows)
    return ap.parse_args()


def linux_tcp(ns, run):
    """Seed the run and set TCP's defaults as above (before any node is made)."""
    ns.RngSeedManager.SetRun(run)
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


def bulk_streams(ns, client, server_node, server, flows, stop, port=5201):
    """`flows` bulk TCP senders on `client` into one sink on `server_node` (address `server`), each
    started within the first 10 ms as iperf3 -P opens its streams. Returns the sink's applications
    and each sender with its start time."""
    sink = ns.PacketSinkHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
    )
    sink_apps = sink.Install(server_node)
    sink_apps.Start(ns.Seconds(0))
    rng = ns.CreateObject[ns.UniformRandomVariable]()
    senders = []
    for _ in range(flows):
        bulk = ns.BulkSendHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(server, port).ConvertTo()
        )
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        app = bulk.Install(client).Get(0)
        start = ns.MicroSeconds(int(rng.GetValue(0, 10000)))
        app.SetStartTime(start)
        app.SetStopTime(stop)
        senders.append((app, start))
    return sink_apps, senders


def received(ns, sink_apps):
    """Bytes the sink's applications received."""
    return sum(
        ns.DynamicCast[ns.PacketSink](sink_apps.Get(i)).GetTotalRx() for i in range(sink_apps.GetN())
    )


def ping(ns, client, server, stop):
    """A ping every 100 ms from `client` to `server` (56 bytes of data), silent. Returns its
    applications."""
    helper = ns.PingHelper(server.ConvertTo())
    helper.SetAttribute("Interval", ns.TimeValue(ns.MilliSeconds(100)))
    helper.SetAttribute("Size", ns.UintegerValue(56))
    helper.SetAttribute("VerboseMode", ns.StringValue("Silent"))
    apps = helper.Install(client)
    apps.Start(ns.MilliSeconds(1))
    apps.Stop(stop)
    return apps
