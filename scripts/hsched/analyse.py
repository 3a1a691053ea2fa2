#!/usr/bin/env python3
"""The host scheduling delay in lab.sh's runs (docs/KERNEL_VS_SIM.md, "Host scheduling delay").

For each run, after the first 1.5 s (startup):
- tx: each frame's departure from the router's HTB (seen at s0) minus the earliest its tokens allowed,
  the previous frame's departure plus that frame's time at 10 Mbit/s (HTB charges a frame after
  sending it, so the wait before a frame is its predecessor's cost; the class stays backlogged);
- rx: each ACK the server sends minus the arrival of the data segment it acknowledges (the one
  ending where it points; until 2026-11-28 the last segment before it, which cut an ACK held past
  the next segment's arrival short: docs/KERNEL_VS_SIM.md, "One frame late");
- the ping's median RTT.
Then the share of each beyond 100 µs ... 5 ms, pooled over the runs given.
Usage: analyse.py DIR N...   (DIR/rN.s0.pcap and DIR/rN.ping from lab.sh)
"""
import re, subprocess, sys

RATE = 10e6


def packets(pcap):
    """(time, kind, frame bytes, (client port, sequence number)) for data segments (where they end),
    pings and ACKs (what they acknowledge) of the iperf3 connections."""
    out = subprocess.run(["tcpdump", "-r", pcap, "-tt", "-n", "--nano"],
                         capture_output=True, text=True).stdout
    ev = []
    for line in out.splitlines():
        m = re.match(r"(\d+\.\d+) IP (\S+) > (\S+): (.*)", line)
        if not m:
            continue
        t, src, dst, rest = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        if "ICMP echo request" in rest:
            ev.append((t, "ping", 98, None))
        elif src.endswith(".5201") or dst.endswith(".5201"):
            n = re.search(r"length (\d+)", rest)
            n = int(n.group(1)) if n else 0
            if src.startswith("10.0.1.1") and n > 0:
                e = re.search(r"seq \d+:(\d+)", rest)
                key = (src.rsplit(".", 1)[1], int(e.group(1))) if e else None
                ev.append((t, "data", n + 66, key))  # Ethernet, IP, TCP with timestamps
            elif src.startswith("10.0.2.2") and n == 0 and "ack" in rest:
                a = re.search(r"ack (\d+)", rest)
                if a:
                    ev.append((t, "ack", 0, (dst.rstrip(":").rsplit(".", 1)[1], int(a.group(1)))))
    return ev


def delays(ev):
    """tx and rx (µs) of one run's packets() after its first 1.5 s."""
    t0 = next(t for t, k, _, _ in ev if k == "data") + 1.5
    out = [(t, l) for t, k, l, _ in ev if k != "ack" and t > t0]
    tx = [(b[0] - a[0] - a[1] * 8 / RATE) * 1e6 for a, b in zip(out, out[1:])]
    arrived, rx = {}, []
    for t, k, _, key in ev:
        if k == "data" and key:
            arrived.setdefault(key, t)
        elif k == "ack" and key in arrived:
            came = arrived.pop(key)  # the first ACK naming it
            if t > t0:
                rx.append((t - came) * 1e6)
    return tx, rx


def ping_p50(path):
    rtt = sorted(float(x) for x in re.findall(r"time=([\d.]+)", open(path).read()))
    return rtt[(len(rtt) + 1) // 2 - 1]


def main():
    d, runs = sys.argv[1], sys.argv[2:]
    tx, rx = [], []
    for n in runs:
        run_tx, run_rx = delays(packets(f"{d}/r{n}.s0.pcap"))
        print(f"run {n}: {len(run_tx)} departures, {len(run_rx)} ACKs, ping p50 "
              f"{ping_p50(f'{d}/r{n}.ping'):.2f} ms; beyond 300 us / 1 ms: tx "
              f"{sum(x > 300 for x in run_tx)} / {sum(x > 1000 for x in run_tx)}, rx "
              f"{sum(x > 300 for x in run_rx)} / {sum(x > 1000 for x in run_rx)}")
        tx += run_tx
        rx += run_rx
    for name, v in (("tx (HTB departure late)", tx), ("rx (ACK turnaround)", rx)):
        cells = " ".join(f">{e}us {sum(x > e for x in v) / len(v) * 100:.3f}%"
                         for e in (100, 200, 300, 500, 800, 1000, 1200, 1500, 2000, 5000))
        print(f"{name}, {len(v)} events: {cells}")


if __name__ == "__main__":
    main()
