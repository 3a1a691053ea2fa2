//! AF_XDP ports (`tclab live --xdp`): frames in and out of an interface through an `AF_XDP` socket
//! in copy mode, without clang, libbpf or a crate. The XDP program is six instructions assembled
//! here (`bpf_redirect_map` of every frame into an XSKMAP of one socket, `XDP_PASS` if the slot is
//! empty), loaded with `bpf(BPF_PROG_LOAD)` and attached in generic mode (`XDP_FLAGS_SKB_MODE`,
//! which any driver takes: a veth's frames reach it after the kernel has built the skb) through a
//! BPF link (`BPF_LINK_CREATE`): the link is a descriptor, so the program is detached however the
//! process ends, a crash or SIGKILL included, with nothing to clean up.
//!
//! One UMEM per port: its first [`RX_FRAMES`] chunks are lent to the kernel through the fill ring
//! and come back in the RX ring holding a frame each (given back once the frame is read: the bridge
//! copies it into a packet), the other [`TX_FRAMES`] carry frames out through the TX ring and come
//! back through the completion ring. In copy mode a `sendto` makes the kernel send what the TX ring
//! holds (`xsk_generic_xmit`: an skb per frame, past the interface's qdisc, as `PACKET_QDISC_BYPASS`
//! sends), at most a budget of frames a call.
//!
//! Needs `CAP_NET_RAW`, `CAP_BPF` and `CAP_NET_ADMIN` while it is set up (before the bridge drops its
//! capabilities), one receive queue on the interface (the program sends queue 0's frames to the
//! socket), and frames that fit a chunk less the kernel's headroom (an MTU up to 3 818 bytes).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// Chunks lent to the kernel for arriving frames.
pub const RX_FRAMES: u32 = 4096;
/// Chunks for frames on their way out.
pub const TX_FRAMES: u32 = 2048;
/// `XDP_PACKET_HEADROOM`: what the kernel keeps in front of a frame in its chunk.
const HEADROOM: u32 = 256;
/// `bpf(2)` commands and types.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` (enum bpf_attach_type).
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// The bytes of `union bpf_attr` passed (the kernel reads the commands' fields within them).
const ATTR: usize = 128;

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// `bpf(cmd, attr)`: a new descriptor for the commands that make one.
fn bpf(cmd: libc::c_long, attr: &mut [u8; ATTR]) -> io::Result<libc::c_long> {
    // SAFETY: the kernel reads (and for some commands writes) at most ATTR bytes of the buffer we
    // own; the pointers inside it are the caller's, live through the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), ATTR as libc::c_uint) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// What the program and its map are called (`map_name`, `prog_name`: 16 bytes, NUL-terminated), so
/// that `ip link show` (`prog/xdp id 444 name tclab_xsk`) and `bpftool prog` say whose they are.
const NAME: &[u8] = b"tclab_xsk";

fn put_name(a: &mut [u8; ATTR], at: usize) {
    a[at..at + NAME.len()].copy_from_slice(NAME);
}

fn put_u32(a: &mut [u8; ATTR], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(a: &mut [u8; ATTR], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// An owned descriptor from a `bpf` call.
fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just made for this process, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// One eBPF instruction: opcode, registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | dst;
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The XDP program: every frame to the socket in the XSKMAP `map` at the frame's receive queue.
fn program(map: RawFd) -> Vec<u8> {
    [
        // r2 = ctx->rx_queue_index (struct xdp_md, offset 16)
        insn(0x61, 2, 1, 16, 0),
        // r1 = the map (ld_imm64 with BPF_PSEUDO_MAP_FD: two slots)
        insn(0x18, 1, 1, 0, map),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS, what bpf_redirect_map returns if the slot is empty
        insn(0xb7, 3, 0, 0, 2),
        // call bpf_redirect_map (helper 51)
        insn(0x85, 0, 0, 0, 51),
        // exit
        insn(0x95, 0, 0, 0, 0),
    ]
    .concat()
}

/// A ring shared with the kernel: a producer index, a consumer index and `size` entries of `T`.
/// This process owns one of the indices (`local`, which it also publishes), the kernel the other.
///
/// Invariants: `map` is a live mapping of `map_len` bytes holding the two indices and the entries at
/// the offsets the kernel gave, for as long as the value lives; `size` is a power of two.
struct XskRing<T> {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut T,
    size: u32,
    /// This side's index (producer or consumer, as the ring is used).
    local: u32,
}

// SAFETY: the mapping is owned by this value alone; moving it to another thread moves that ownership.
unsafe impl<T> Send for XskRing<T> {}

impl<T: Copy> XskRing<T> {
    /// Map ring `pgoff` of socket `fd`, `size` entries, at the offsets `off` the kernel gave.
    fn map(fd: RawFd, pgoff: u64, off: &libc::xdp_ring_offset, size: u32) -> io::Result<Self> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: maps the ring the kernel made for this socket, shared, of the length it has.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(last_error("mmap of an AF_XDP ring"));
        }
        let map = map as *mut u8;
        // SAFETY: the offsets lie within the mapping (the kernel's layout), 4-byte aligned for the
        // indices and aligned for the entries.
        let (producer, consumer, desc) = unsafe {
            (
                map.add(off.producer as usize) as *const AtomicU32,
                map.add(off.consumer as usize) as *const AtomicU32,
                map.add(off.desc as usize) as *mut T,
            )
        };
        Ok(XskRing {
            map,
            map_len,
            producer,
            consumer,
            desc,
            size,
            local: 0,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: within the live mapping (the invariant); the kernel writes it too, hence atomic.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    /// Entry `i` (taken modulo the size).
    fn get(&self, i: u32) -> T {
        // SAFETY: the index is within the ring; the entry is this side's to read (the caller's
        // index discipline: between the kernel's published producer and our consumer).
        unsafe {
            self.desc
                .add((i & (self.size - 1)) as usize)
                .read_volatile()
        }
    }

    fn set(&mut self, i: u32, v: T) {
        // SAFETY: as for `get`, for an entry this side produces (between our producer and the
        // kernel's consumer plus the size).
        unsafe {
            self.desc
                .add((i & (self.size - 1)) as usize)
                .write_volatile(v)
        }
    }

    /// As the producing side: free entries.
    fn free(&self) -> u32 {
        // Acquire: the entries the kernel has consumed are ours to write again.
        self.size
            - self
                .local
                .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// As the producing side: publish the entries written up to `local`.
    fn submit(&self) {
        // Release: the entries' contents before the index that hands them over.
        self.producer().store(self.local, Ordering::Release);
    }

    /// As the consuming side: entries ready.
    fn ready(&self) -> u32 {
        // Acquire: the entries' contents are read after the index that says they are there.
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    /// As the consuming side: give back the entries read up to `local`.
    fn release(&self) {
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for XskRing<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping this value owns; no reference into it outlives the value.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// The UMEM: anonymous memory, chunk by chunk, registered with the socket.
struct Umem {
    map: *mut u8,
    len: usize,
}

// SAFETY: owned by this value alone.
unsafe impl Send for Umem {}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping this value owns.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}

/// An interface's AF_XDP socket, its UMEM, rings and attached program.
pub struct XdpPort {
    // Field order is drop order: the rings before the socket, the link (which detaches the
    // program) first of all so that no frame is redirected to a socket going away.
    _link: OwnedFd,
    rx: XskRing<libc::xdp_desc>,
    tx: XskRing<libc::xdp_desc>,
    fill: XskRing<u64>,
    comp: XskRing<u64>,
    fd: OwnedFd,
    _map: OwnedFd,
    _prog: OwnedFd,
    umem: Umem,
    chunk: u32,
    /// TX chunks free for a frame (their addresses in the UMEM).
    free_tx: Vec<u64>,
    /// The last [`XdpPort::kick`] left frames in the TX ring the kernel would not take.
    stalled: bool,
    /// What [`XdpPort::lost`] has counted so far (the kernel's counters are since the socket opened).
    lost_seen: u64,
}

/// The chunk size for frames of an interface of MTU `mtu` (and its link header, two VLAN tags):
/// 2 KiB or 4 KiB (a chunk is a power of two, at most a page), or why none holds it.
pub fn chunk_for(mtu: u32) -> Result<u32, String> {
    let frame = mtu + 14 + 8;
    [2048, 4096]
        .into_iter()
        .find(|c| frame <= c - HEADROOM)
        .ok_or_else(|| {
            format!(
                "MTU {mtu} is too large for AF_XDP in copy mode (frames of up to {} bytes in \
                 4 KiB chunks): lower it, or bridge without --xdp",
                4096 - HEADROOM
            )
        })
}

/// Receive queues of interface `name` of index `ifindex`, as sysfs shows them; 1 if sysfs shows
/// another namespace's interfaces (a thread that entered a namespace without remounting /sys) or
/// none.
fn rx_queues(name: &str, ifindex: i32) -> usize {
    let shown = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"));
    if shown.ok().and_then(|s| s.trim().parse::<i32>().ok()) != Some(ifindex) {
        return 1;
    }
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
}

impl XdpPort {
    /// Open an AF_XDP socket on interface `name` (index `ifindex`, MTU `mtu`) and attach the
    /// program that feeds it. Every refusal names the step and what to do.
    pub fn open(name: &str, ifindex: i32, mtu: u32) -> Result<XdpPort, String> {
        let chunk = chunk_for(mtu).map_err(|e| format!("{name}: {e}"))?;
        let queues = rx_queues(name, ifindex);
        if queues != 1 {
            return Err(format!(
                "{name}: {queues} receive queues; --xdp serves one (ip link add … numrxqueues 1)"
            ));
        }
        let privilege = |what: &str, e: io::Error| {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    " (--xdp needs CAP_BPF and CAP_NET_ADMIN: run it as root)"
                }
                _ => "",
            };
            format!("{name}: {what}: {e}{hint}")
        };
        // The XSKMAP: one slot, the socket of queue 0.
        let mut a = [0u8; ATTR];
        put_u32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
        put_u32(&mut a, 4, 4);
        put_u32(&mut a, 8, 4);
        put_u32(&mut a, 12, 1);
        put_name(&mut a, 28);
        let map = owned(bpf(BPF_MAP_CREATE, &mut a).map_err(|e| privilege("an XSKMAP", e))?);
        let prog_bytes = program(map.as_raw_fd());
        let license = b"GPL\0";
        let mut log = vec![0u8; 4096];
        let mut a = [0u8; ATTR];
        put_u32(&mut a, 0, BPF_PROG_TYPE_XDP);
        put_u32(&mut a, 4, (prog_bytes.len() / 8) as u32);
        put_u64(&mut a, 8, prog_bytes.as_ptr() as u64);
        put_u64(&mut a, 16, license.as_ptr() as u64);
        put_u32(&mut a, 24, 1);
        put_u32(&mut a, 28, log.len() as u32);
        put_u64(&mut a, 32, log.as_mut_ptr() as u64);
        put_name(&mut a, 48);
        let prog = owned(bpf(BPF_PROG_LOAD, &mut a).map_err(|e| {
            let text = String::from_utf8_lossy(&log);
            let text = text.trim_end_matches('\0').trim();
            let mut m = privilege("loading the XDP program", e);
            if !text.is_empty() {
                m.push_str(&format!(" (verifier: {text})"));
            }
            m
        })?);

        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                " (this kernel has no AF_XDP sockets: CONFIG_XDP_SOCKETS)"
            } else {
                ""
            };
            return Err(format!("{name}: an AF_XDP socket: {e}{hint}"));
        }
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let frames = RX_FRAMES + TX_FRAMES;
        let len = frames as usize * chunk as usize;
        // SAFETY: an anonymous private mapping of `len` bytes, owned at once by `Umem`.
        let m = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            return Err(format!("{name}: {}", last_error("the AF_XDP UMEM")));
        }
        let umem = Umem {
            map: m as *mut u8,
            len,
        };
        let sockopt = |opt: libc::c_int, v: &[u8], what: &str| -> Result<(), String> {
            // SAFETY: the kernel reads `v.len()` bytes of the buffer we own.
            let r = unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_XDP,
                    opt,
                    v.as_ptr() as *const libc::c_void,
                    v.len() as libc::socklen_t,
                )
            };
            if r != 0 {
                return Err(format!("{name}: {}", last_error(what)));
            }
            Ok(())
        };
        let reg = libc::xdp_umem_reg {
            addr: umem.map as u64,
            len: len as u64,
            chunk_size: chunk,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        // SAFETY: xdp_umem_reg is plain old data; its bytes are read as such.
        let reg_bytes = unsafe {
            std::slice::from_raw_parts(
                &reg as *const libc::xdp_umem_reg as *const u8,
                std::mem::size_of::<libc::xdp_umem_reg>(),
            )
        };
        sockopt(libc::XDP_UMEM_REG, reg_bytes, "XDP_UMEM_REG")?;
        sockopt(
            libc::XDP_UMEM_FILL_RING,
            &RX_FRAMES.to_ne_bytes(),
            "XDP_UMEM_FILL_RING",
        )?;
        sockopt(
            libc::XDP_UMEM_COMPLETION_RING,
            &TX_FRAMES.to_ne_bytes(),
            "XDP_UMEM_COMPLETION_RING",
        )?;
        sockopt(libc::XDP_RX_RING, &RX_FRAMES.to_ne_bytes(), "XDP_RX_RING")?;
        sockopt(libc::XDP_TX_RING, &TX_FRAMES.to_ne_bytes(), "XDP_TX_RING")?;
        // SAFETY: xdp_mmap_offsets is plain old data; all zeroes is a valid value.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut olen = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `olen` bytes into the struct we own.
        let r = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut libc::xdp_mmap_offsets as *mut libc::c_void,
                &mut olen,
            )
        };
        if r != 0 {
            return Err(format!("{name}: {}", last_error("XDP_MMAP_OFFSETS")));
        }
        let ring_err = |e: io::Error| format!("{name}: {e}");
        let rx = XskRing::map(raw, libc::XDP_PGOFF_RX_RING as u64, &off.rx, RX_FRAMES)
            .map_err(ring_err)?;
        let tx = XskRing::map(raw, libc::XDP_PGOFF_TX_RING as u64, &off.tx, TX_FRAMES)
            .map_err(ring_err)?;
        let mut fill = XskRing::map(raw, libc::XDP_UMEM_PGOFF_FILL_RING, &off.fr, RX_FRAMES)
            .map_err(ring_err)?;
        let comp = XskRing::map(
            raw,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            &off.cr,
            TX_FRAMES,
        )
        .map_err(ring_err)?;
        // Every receive chunk to the kernel before the socket is bound.
        for i in 0..RX_FRAMES {
            let at = fill.local;
            fill.set(at, u64::from(i) * u64::from(chunk));
            fill.local = at.wrapping_add(1);
        }
        fill.submit();
        let free_tx = (RX_FRAMES..frames)
            .rev()
            .map(|i| u64::from(i) * u64::from(chunk))
            .collect();
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_COPY,
            sxdp_ifindex: ifindex as u32,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: bind reads the address we own, of its size.
        let r = unsafe {
            libc::bind(
                raw,
                &sxdp as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(format!(
                "{name}: {}",
                last_error("binding the AF_XDP socket")
            ));
        }
        // The socket into the map's slot 0.
        let (key, value) = (0u32, raw as u32);
        let mut a = [0u8; ATTR];
        put_u32(&mut a, 0, map.as_raw_fd() as u32);
        put_u64(&mut a, 8, &key as *const u32 as u64);
        put_u64(&mut a, 16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map_err(|e| privilege("the socket into the XSKMAP", e))?;
        // Attached last: no frame is redirected before the socket is there.
        let mut a = [0u8; ATTR];
        put_u32(&mut a, 0, prog.as_raw_fd() as u32);
        put_u32(&mut a, 4, ifindex as u32);
        put_u32(&mut a, 8, BPF_XDP);
        put_u32(&mut a, 12, XDP_FLAGS_SKB_MODE);
        let link = owned(bpf(BPF_LINK_CREATE, &mut a).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => {
                    " (an XDP program is attached to it already: ip link show dev NAME)"
                }
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                    " (its driver takes no XDP program, even in generic mode)"
                }
                _ => "",
            };
            format!(
                "{}{}",
                privilege("attaching the XDP program (generic mode)", e),
                hint.replace("NAME", name)
            )
        })?);
        Ok(XdpPort {
            _link: link,
            rx,
            tx,
            fill,
            comp,
            fd,
            _map: map,
            _prog: prog,
            umem,
            chunk,
            free_tx,
            stalled: false,
            lost_seen: 0,
        })
    }

    /// The socket, readable when the RX ring holds frames.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The longest frame a chunk holds.
    pub fn max_frame(&self) -> usize {
        (self.chunk - HEADROOM) as usize
    }

    /// Hand up to `max` frames of the RX ring to `f`, each read in place in the UMEM, and give
    /// their chunks back to the kernel. Returns how many.
    pub fn take(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let n = self.rx.ready().min(max as u32);
        if n == 0 {
            return 0;
        }
        let mask = !(u64::from(self.chunk) - 1);
        for _ in 0..n {
            let d = self.rx.get(self.rx.local);
            self.rx.local = self.rx.local.wrapping_add(1);
            let end = d.addr.saturating_add(u64::from(d.len));
            if end <= self.umem.len as u64 {
                // SAFETY: the descriptor's bytes lie within the UMEM (checked), and the chunk is
                // this process's until it goes back on the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.map.add(d.addr as usize), d.len as usize)
                };
                f(frame);
            }
            // The fill ring has room: it holds RX_FRAMES and every chunk is in one ring or here.
            let at = self.fill.local;
            self.fill.set(at, d.addr & mask);
            self.fill.local = at.wrapping_add(1);
        }
        self.rx.release();
        self.fill.submit();
        n as usize
    }

    /// Chunks the kernel has sent from, back to the free list.
    fn reap(&mut self) {
        let n = self.comp.ready();
        for _ in 0..n {
            let addr = self.comp.get(self.comp.local);
            self.comp.local = self.comp.local.wrapping_add(1);
            self.free_tx.push(addr);
        }
        if n > 0 {
            self.comp.release();
        }
    }

    /// Put `frame` in the TX ring: `Ok(false)` if there is no room now (the frames before it wait
    /// for [`XdpPort::kick`]), an error if it is larger than a chunk.
    pub fn push(&mut self, frame: &[u8]) -> io::Result<bool> {
        if frame.len() > self.chunk as usize {
            return Err(io::Error::other("frame larger than an AF_XDP chunk"));
        }
        if self.free_tx.is_empty() {
            self.reap();
        }
        if self.tx.free() == 0 {
            return Ok(false);
        }
        let Some(addr) = self.free_tx.pop() else {
            return Ok(false);
        };
        // SAFETY: a free TX chunk lies within the UMEM and is this process's; the frame fits it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.map.add(addr as usize),
                frame.len(),
            )
        };
        let at = self.tx.local;
        self.tx.set(
            at,
            libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        self.tx.local = at.wrapping_add(1);
        Ok(true)
    }

    /// Publish what [`XdpPort::push`] wrote and have the kernel send it (`sendto`, a budget of
    /// frames a call, so called again while it takes some); what it will not take now stalls
    /// the port until the next kick.
    pub fn kick(&mut self) -> io::Result<()> {
        self.tx.submit();
        self.stalled = false;
        // Bounded: 2048 frames take 64 calls of the default budget (32).
        for _ in 0..128 {
            let before = self.tx.consumer().load(Ordering::Acquire);
            if before == self.tx.local {
                break;
            }
            // SAFETY: sendto with no data: the kernel sends from the TX ring.
            let r = unsafe {
                libc::sendto(
                    self.raw(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            let after = self.tx.consumer().load(Ordering::Acquire);
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // The budget spent, or the device busy (NETDEV_TX_BUSY): again if it took any.
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) if after != before => continue,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                        self.stalled = true;
                        break;
                    }
                    // A frame the device dropped (down, or without a carrier): taken, go on.
                    Some(libc::EBUSY) | Some(libc::ENETDOWN) | Some(libc::ENXIO)
                        if after != before =>
                    {
                        continue
                    }
                    _ => {
                        self.stalled = true;
                        return Err(e);
                    }
                }
            }
            if after == before {
                // Taken without an error yet none sent: wait for the next kick.
                self.stalled = true;
                break;
            }
        }
        self.reap();
        Ok(())
    }

    /// Whether frames wait in the TX ring for another [`XdpPort::kick`].
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// Frames the kernel could not hand to this socket since the last call: no chunk on the fill
    /// ring, too long for a chunk, or the RX ring full (`XDP_STATISTICS`).
    pub fn lost(&mut self) -> io::Result<u64> {
        // SAFETY: xdp_statistics is plain old data; all zeroes is a valid value.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into the struct we own.
        let r = unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut libc::xdp_statistics as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 {
            return Err(last_error("XDP_STATISTICS"));
        }
        let all = st.rx_dropped + st.rx_ring_full;
        let new = all.saturating_sub(self.lost_seen);
        self.lost_seen = all;
        Ok(new)
    }
}
