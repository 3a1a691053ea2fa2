#!/usr/bin/env python3
"""The client's pacing timer in lab.sh's runs (docs/KERNEL_VS_SIM.md, "A late pacing timer").

Each data segment leaving c0 after the first 1.5 s, against the previous one: ACK-driven when it left
within 50 us of an ACK's arrival at c0, else timer-driven (the pacing timer). Prints the timer-driven
gaps' percentiles and their tail beyond the pacing interval (1.22 ms at gain 1, 1.63 ms at 3/4).
Usage: c0_timer.py DIR N...   (DIR/rN.c0.pcap from lab.sh)
"""
import re, subprocess, sys
def ev(p):
    out = subprocess.run(["tcpdump","-r",p,"-tt","-n","--nano"],capture_output=True,text=True).stdout
    r=[]
    for l in out.splitlines():
        m=re.match(r"(\d+\.\d+) IP (\S+) > (\S+): (.*)",l)
        if not m: continue
        t,src,dst,rest=float(m.group(1)),m.group(2),m.group(3),m.group(4)
        if not (src.endswith(".5201") or dst.endswith(".5201")): continue
        n=re.search(r"length (\d+)",rest); n=int(n.group(1)) if n else 0
        if src.startswith("10.0.1.1") and n>1000: r.append((t,"d"))
        elif src.startswith("10.0.2.2") and n==0: r.append((t,"a"))
    return r
d=sys.argv[1]; allg=[]
for n in sys.argv[2:]:
    e=ev(f"{d}/r{n}.c0.pcap"); t0=next(t for t,k in e if k=="d")+1.5
    lastd=None; lasta=None; tim=[]; ackd=0
    for t,k in e:
        if k=="a": lasta=t; continue
        if lastd is not None and t>t0:
            g=(t-lastd)*1e6
            if lasta is not None and t-lasta<50e-6: ackd+=1
            else: tim.append(g)
        lastd=t
    allg+=tim
    print(f"run {n}: {ackd} ACK-driven, {len(tim)} timer-driven; timer gaps >1.5ms {sum(g>1500 for g in tim)} >2ms {sum(g>2000 for g in tim)} >3ms {sum(g>3000 for g in tim)}")
tim=sorted(allg)
print("timer-driven gaps pct: p10 %.0f p50 %.0f p90 %.0f p99 %.0f"%tuple(tim[int(len(tim)*q)] for q in (0.1,0.5,0.9,0.99)))
for e in (1300,1500,1700,2000,2500,3000,5000):
    print(f">{e}us {sum(g>e for g in tim)/len(tim)*100:.3f}%", end="  ")
print()
