#!/usr/bin/env python3
"""The BBR sender's regime through ss.sh's runs (docs/KERNEL_VS_SIM.md, "Host scheduling delay").

Per run: the ping's p50, the bandwidth estimate's range in ProbeBW (against the bottleneck's 9.5646
Mbit/s of payload), and per 0.5 s window from ProbeBW's start the mean of `unacked` (in flight: ~10
cwnd-bound, 5-8 paced) with the window's highest estimate over the bottleneck.
Usage: ss_regime.py [DIR] (default /tmp/hb-meas)."""
import glob
import re
import statistics
import sys

BOTTLENECK = 9.5646  # Mbit/s of payload through HTB 10mbit (1448 of 1514 bytes)

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/hb-meas"
for f in sorted(glob.glob(f"{d}/r*.ss")):
    samples, t = [], None
    for line in open(f):
        if line.startswith("T "):
            t = float(line.split()[1])
            continue
        m = re.search(r"bbr:\(bw:(\d+)bps", line)
        acked = re.search(r"bytes_acked:(\d+)", line)
        gain = re.search(r"pacing_gain:([\d.]+)", line)
        if not m or not acked or int(acked.group(1)) < 100_000:
            continue  # not the data stream
        if not samples and float(gain.group(1)) not in (1.0, 1.25, 0.75):
            continue  # startup or drain
        unacked = re.search(r"unacked:(\d+)", line)
        samples.append((t, int(m.group(1)) / 1e6, int(unacked.group(1)) if unacked else 0))
    if not samples:
        continue
    t0 = samples[0][0]
    late = samples
    bws = [s[1] for s in late]
    rtts = [float(x) for x in re.findall(r"time=([\d.]+)", open(f[:-3] + ".ping").read())]
    print(f"{f}: ping p50 {statistics.median(rtts):.2f} ms, estimate {min(bws):.3f}-{max(bws):.3f} "
          f"Mbit/s ({len(late)} samples, {sum(b > BOTTLENECK * 1.05 for b in bws)} over +5 %)")
    windows = []
    for w in range(0, 16):
        ws = [s for s in late if w * 0.5 <= s[0] - t0 < (w + 1) * 0.5]
        if ws:
            mean = statistics.mean(s[2] for s in ws)
            over = max(s[1] for s in ws) / BOTTLENECK * 100 - 100
            windows.append(f"{w * 0.5:.1f}s {mean:.1f} {over:+.1f}%")
    print("   ", " | ".join(windows))
