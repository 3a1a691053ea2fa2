#!/usr/bin/env python3
"""The sender's side of lab.sh's runs, per run (docs/KERNEL_VS_SIM.md, "The client's side, and one
frame late").

From DIR/rN.c0.pcap (the sender's veth: ACKs as they arrive, data as it leaves), after the first 1.5 s:
- regime: in flight each ACK finds (the highest sequence sent minus the previous ACK, in 1448-byte
  segments) averaged over the ACKs of each 250 ms window; cwnd-bound at 9.5 or more, paced at 8.5
  or less; the windows in each, and when the first paced one began;
- ACK gaps: ACK interarrival at c0 beyond 3.2 ms (0.8 ms late: the ACKs come every 2.42 ms), and
  when the first came (the kernel's stream leaves the cwnd-bound regime at one);
- react: each ACK to the first departure after it, for ACKs in cwnd-bound windows whose last
  departure was 1.7 ms or more before (the departure time passed, cwnd freed: the ACK sends at
  once): beyond 100 / 300 / 1000 us, the client's own ACK-processing lateness (softirq, socket
  backlog behind iperf3's sendmsg);
- timer: departures not within 50 us of an ACK (the pacing timer's) against the previous departure,
  beyond 1.7 / 2 ms (1.63 ms the longest pacing interval, the 3/4 phase's);
- switch: an ACK from which on at most 2 of 16 ACKs send at once, after 12 of 16 did, with the
  ACK gaps and reactions around it.
Then from DIR/rN.s0.pcap analyse.py's tx and rx beyond 300 us and 1 ms, the ping's p50, and each late
ACK (1.5-7.6 s) as s0 saw it: late already when the server sent it, after a data segment that came
late ('frame') or late from the server itself ('server').
Usage: client.py DIR N...
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyse import delays, packets, ping_p50  # noqa: E402

SEG = 1448


def causes(s0, c0, first):
    """The late ACKs at c0 as s0 saw them (s0 and c0: packets() of each capture)."""
    def times(ev, kind):
        out = {}
        for t, k, _, key in ev:
            if k == kind and key:
                out.setdefault(key, t)
        return out
    ac, as_, ds = times(c0, "ack"), times(s0, "ack"), times(s0, "data")
    ks = sorted((k for k in ac if k in as_ and 1.5 < ac[k] - first < 7.6), key=ac.get)
    out = []
    for a, b in zip(ks, ks[1:]):
        if ac[b] - ac[a] > 3.2e-3:
            turn = (as_[b] - ds[b]) * 1e6 if b in ds else float("nan")
            out.append("%.2fs %.2f ms at c0, %.2f at s0, %s (ACK %.0f us after its segment)" % (
                ac[b] - first, (ac[b] - ac[a]) * 1e3, (as_[b] - as_[a]) * 1e3,
                "server" if turn > 200 else "frame", turn))
    return out


def run(d, n):
    c0 = packets(f"{d}/r{n}.c0.pcap")
    # The data connection only (iperf3's control connection shares port 5201).
    ports = [key[0] for _, k, _, key in c0 if k == "data" and key]
    port = max(set(ports), key=ports.count)
    ev = [(t, k[0], key[1]) for t, k, l, key in c0
          if key and key[0] == port and (k == "ack" or l > 1000)]
    first = next(t for t, k, _ in ev if k == "d")
    t0 = first + 1.5
    nxt = una = 0
    lastd = lasta = None
    win = {}  # window index -> [sum in flight, ACKs]
    acks = []  # [arrival, gap from the previous ACK, last departure before it, first departure after]
    timer = []
    for t, k, v in ev:
        if k == "d":
            if acks and acks[-1][3] is None:
                acks[-1][3] = t
            if lastd is not None and t > t0 and not (lasta is not None and t - lasta < 50e-6):
                timer.append((t - lastd) * 1e6)
            nxt = max(nxt, v)
            lastd = t
        elif lastd is not None:  # (the handshake's ACKs carry absolute numbers)
            if t > t0 and v > una:
                s = win.setdefault(int((t - first) / 0.25), [0.0, 0])
                s[0] += (nxt - una) / SEG
                s[1] += 1
                acks.append([t, t - lasta, lastd, None])
            una = max(una, v)
            lasta = t
    acks = [a for a in acks if a[3] is not None]
    means = {w: s[0] / s[1] for w, s in win.items() if s[1]}
    cwnd = {w for w, m in means.items() if m >= 9.5}
    paced = {w for w, m in means.items() if m <= 8.5}
    firstp = min(paced) * 0.25 if paced else None
    react = [(a[3] - a[0]) * 1e6 for a in acks
             if int((a[0] - first) / 0.25) in cwnd and a[0] - a[2] >= 1.7e-3]
    # Switches. (Near the run's end the last ACKs send nothing: a "switch" there is iperf3 stopping.)
    now = [a[3] - a[0] < 50e-6 for a in acks]
    sw = []
    i = 16
    while i < len(acks) - 16:
        if sum(now[i - 16:i]) >= 12 and sum(now[i:i + 16]) <= 2:
            sw.append("%.2fs ACK gaps %s ms, react %s us" % (
                acks[i][0] - first,
                "/".join("%.2f" % (acks[k][1] * 1e3) for k in range(i - 2, i + 2)),
                "/".join("%.0f" % ((acks[k][3] - acks[k][0]) * 1e6) for k in range(i - 2, i + 2))))
            i += 16
        else:
            i += 1
    s0 = packets(f"{d}/r{n}.s0.pcap")
    tx, rx = delays(s0)
    lf = f"{d}/r{n}.load" if os.path.exists(f"{d}/r{n}.load") else f"{d}/r{n}.load0"
    load = open(lf).read().split("average:")[1].split(",")[0].strip()
    pct = lambda v, e: 100 * sum(x > e for x in v) / max(len(v), 1)
    gaps = [a[1] * 1e6 for a in acks]
    late = [a[0] - first for a in acks if a[1] > 3.2e-3]
    print(f"r{n} load {load} p50 {ping_p50(f'{d}/r{n}.ping'):.2f} | windows cwnd {len(cwnd)} "
          f"paced {len(paced)} of {len(means)}, first paced "
          f"{'-' if firstp is None else f'{firstp:.2f}s'} | first late ACK "
          f"{'-' if not late else f'{late[0]:.2f}s'} | c0 ACK gaps>3.2ms "
          f"{sum(g > 3200 for g in gaps)} >3.6ms {sum(g > 3600 for g in gaps)} | react n {len(react)} "
          f">100 {pct(react, 100):.2f}% >300 {pct(react, 300):.2f}% >1ms {pct(react, 1000):.2f}% | "
          f"timer n {len(timer)} >1.7ms {pct(timer, 1700):.3f}% >2ms {pct(timer, 2000):.3f}% | "
          f"s0 tx>300 {pct(tx, 300):.3f}% >1ms {pct(tx, 1000):.3f}% rx>300 {pct(rx, 300):.3f}% "
          f">1ms {pct(rx, 1000):.3f}%")
    for s_ in sw:
        print("   switch at", s_)
    for c in causes(s0, c0, first):
        print("   late ACK", c)


for n in sys.argv[2:]:
    run(sys.argv[1], n)
