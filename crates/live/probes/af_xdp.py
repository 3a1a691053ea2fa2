#!/usr/bin/env python3
"""AF_XDP feasibility probe for tclab live (docs/LIVE.md, "Not yet"): generic XDP on a veth with
no clang, no libbpf and no crate. A hand-assembled XDP program (bpf_redirect_map into an XSKMAP)
is loaded with bpf(2) and attached with `ip link set DEV xdpgeneric pinned FILE`; an AF_XDP
socket in copy mode gets a UMEM, fill, completion and RX rings, mapped; COUNT frames sent on the
veth's peer must arrive in its RX ring. It prints what arrived and detaches the program.

Root, in a namespace of its own (bpffs mounted there), e.g.:
  ip netns add lv-x && ip -n lv-x link add a1 type veth peer name b1
  ip -n lv-x link set a1 up && ip -n lv-x link set b1 up
  ip netns exec lv-x sh -c 'mount -t bpf bpf /sys/fs/bpf && python3 af_xdp.py a1 b1 100'
  ip netns del lv-x
(2026-11-27, Linux 6.18: "101 descriptors in the RX ring, 100 of them the 100 frames sent": one
other frame crossed the veth too.) A probe of feasibility only: its speed is Python's; x86-64
only (the bpf system call's number)."""
import ctypes, ctypes.util, mmap, os, socket, struct, subprocess, sys, time

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_BPF = 321
BPF_MAP_CREATE, BPF_MAP_UPDATE_ELEM, BPF_PROG_LOAD, BPF_OBJ_PIN = 0, 2, 5, 6
BPF_MAP_TYPE_XSKMAP, BPF_PROG_TYPE_XDP = 17, 6
AF_XDP, SOL_XDP = 44, 283
XDP_MMAP_OFFSETS, XDP_RX_RING, XDP_UMEM_REG, XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING = 1, 2, 4, 5, 6
XDP_COPY = 2
XDP_PGOFF_RX_RING, XDP_UMEM_PGOFF_FILL_RING = 0, 0x100000000


def bpf(cmd, attr: bytes):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf cmd {cmd}: {os.strerror(e)}")
    return r


def insn(code, dst=0, src=0, off=0, imm=0):
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def main():
    dev, sender, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ifindex = socket.if_nametoindex(dev)
    map_fd = bpf(BPF_MAP_CREATE, struct.pack("<IIII", BPF_MAP_TYPE_XSKMAP, 4, 4, 1))
    prog = b"".join([
        insn(0x61, dst=2, src=1, off=16),           # r2 = ctx->rx_queue_index
        insn(0x18, dst=1, src=1, imm=map_fd),        # r1 = the XSKMAP (ld_imm64, pseudo map fd)
        insn(0x00),
        insn(0xB7, dst=3, imm=2),                    # r3 = XDP_PASS if the slot is empty
        insn(0x85, imm=51),                          # bpf_redirect_map(r1, r2, r3)
        insn(0x95),                                  # exit
    ])
    insns = ctypes.create_string_buffer(prog, len(prog))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    attr = struct.pack("<IIQQIIQ", BPF_PROG_TYPE_XDP, len(prog) // 8, ctypes.addressof(insns),
                       ctypes.addressof(lic), 1, len(log), ctypes.addressof(log))
    try:
        prog_fd = bpf(BPF_PROG_LOAD, attr)
    except OSError as e:
        print("prog load failed:", e, log.value.decode(errors="replace"))
        raise
    pin = f"/sys/fs/bpf/lv-xdp-{os.getpid()}"
    path = ctypes.create_string_buffer(pin.encode())
    bpf(BPF_OBJ_PIN, struct.pack("<QI", ctypes.addressof(path), prog_fd))
    subprocess.run(["ip", "link", "set", "dev", dev, "xdpgeneric", "pinned", pin], check=True)
    os.unlink(pin)
    try:
        run(dev, ifindex, map_fd, sender, count)
    finally:
        subprocess.run(["ip", "link", "set", "dev", dev, "xdpgeneric", "off"], check=False)


def run(dev, ifindex, map_fd, sender, count):
    frames, chunk = 2048, 2048
    umem = mmap.mmap(-1, frames * chunk, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    umem_addr = ctypes.addressof(ctypes.c_char.from_buffer(umem))
    s = socket.socket(AF_XDP, socket.SOCK_RAW, 0)
    s.setsockopt(SOL_XDP, XDP_UMEM_REG, struct.pack("<QQIIII", umem_addr, frames * chunk, chunk, 0, 0, 0))
    s.setsockopt(SOL_XDP, XDP_UMEM_FILL_RING, struct.pack("<I", frames))
    s.setsockopt(SOL_XDP, XDP_UMEM_COMPLETION_RING, struct.pack("<I", frames))
    s.setsockopt(SOL_XDP, XDP_RX_RING, struct.pack("<I", frames))
    off = struct.unpack("<16Q", s.getsockopt(SOL_XDP, XDP_MMAP_OFFSETS, 128))
    rx_off, fr_off = off[0:4], off[8:12]  # producer, consumer, desc, flags
    rx = mmap.mmap(s.fileno(), rx_off[2] + frames * 16, mmap.MAP_SHARED,
                   mmap.PROT_READ | mmap.PROT_WRITE, offset=XDP_PGOFF_RX_RING)
    fr = mmap.mmap(s.fileno(), fr_off[2] + frames * 8, mmap.MAP_SHARED,
                   mmap.PROT_READ | mmap.PROT_WRITE, offset=XDP_UMEM_PGOFF_FILL_RING)
    # Every chunk to the kernel through the fill ring.
    for i in range(frames):
        struct.pack_into("<Q", fr, fr_off[2] + i * 8, i * chunk)
    struct.pack_into("<I", fr, fr_off[0], frames)
    sxdp = ctypes.create_string_buffer(struct.pack("<HHIII", AF_XDP, XDP_COPY, ifindex, 0, 0), 16)
    if libc.bind(s.fileno(), sxdp, 16) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bind AF_XDP: {os.strerror(e)}")
    # BPF_MAP_UPDATE_ELEM needs pointers to key and value that live through the call.
    key, val = ctypes.c_uint32(0), ctypes.c_uint32(s.fileno())
    bpf(BPF_MAP_UPDATE_ELEM, struct.pack("<IIQQQ", map_fd, 0, ctypes.addressof(key),
                                         ctypes.addressof(val), 0))
    # Send COUNT frames on the peer with a packet socket.
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((sender, 0))
    frame = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xB5]) + bytes(range(46))
    t0 = time.monotonic()
    for _ in range(count):
        tx.send(frame)
    time.sleep(0.2)
    prod = struct.unpack_from("<I", rx, rx_off[0])[0]
    got = []
    for i in range(min(prod, frames)):
        addr, ln, _opts = struct.unpack_from("<QII", rx, rx_off[2] + i * 16)
        got.append(bytes(umem[addr:addr + ln]))
    ours = sum(1 for g in got if g == frame)
    print(f"AF_XDP copy mode on {dev}: {prod} descriptors in the RX ring, {ours} of them the {count} frames sent, "
          f"{time.monotonic() - t0:.3f} s")


if __name__ == "__main__":
    main()
