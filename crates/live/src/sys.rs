//! The system calls of the live driver, each wrapped once with its error worded for a person: AF_PACKET
//! sockets bound to one interface (promiscuous, blind to their own transmissions, past the kernel's
//! qdisc), batched receive and send (`recvmmsg`/`sendmmsg`), `ppoll` with a nanosecond timeout,
//! `CLOCK_MONOTONIC`, the timer slack, the interface's index and MTU, its offloads (`SIOCETHTOOL`), and
//! entering a network namespace. Everything `unsafe` in this crate is here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `ETH_P_ALL` in network order: every protocol.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();
/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): do not see the frames this host sends on the interface.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_AUXDATA`: each frame comes with its metadata, the VLAN tag Linux took out of it among them.
const PACKET_AUXDATA: libc::c_int = 8;
/// `PACKET_QDISC_BYPASS` (Linux 3.14): frames sent go to the driver, not through the kernel's qdisc.
const PACKET_QDISC_BYPASS: libc::c_int = 20;

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &str,
) -> io::Result<()> {
    // SAFETY: `value` is a live reference to a `T` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(last_error(what));
    }
    Ok(())
}

/// The kernel's index of interface `name`.
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c =
        CString::new(name).map_err(|_| io::Error::other(format!("{name:?}: not a device name")))?;
    // SAFETY: `c` is a NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("Cannot find device \"{name}\""),
        ));
    }
    Ok(i as i32)
}

/// An `ifreq` naming `name`.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::other(format!("\"{name}\": not a device name")));
    }
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// A datagram socket for interface ioctls.
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_error("socket"));
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Bind socket `fd` to `addr`, a `sockaddr_*` of the socket's family (`what` names the step).
fn bind<A>(fd: RawFd, addr: &A, what: &str) -> io::Result<()> {
    // SAFETY: bind reads the address we own, of its size.
    let r = unsafe {
        libc::bind(
            fd,
            addr as *const A as *const libc::sockaddr,
            std::mem::size_of::<A>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(last_error(what));
    }
    Ok(())
}

/// The MTU of interface `name`.
pub fn mtu(name: &str) -> io::Result<u32> {
    mtu_by(ioctl_socket()?.as_raw_fd(), name)
}

/// The MTU of interface `name` in the network namespace of socket `fd` (an ioctl names the device in
/// its socket's namespace, whichever namespace the calling thread is in).
pub fn mtu_by(fd: RawFd, name: &str) -> io::Result<u32> {
    let mut r = ifreq(name)?;
    // SAFETY: SIOCGIFMTU reads the name and writes ifru_mtu of the ifreq we own.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut r) } != 0 {
        return Err(last_error(&format!("{name}: reading the MTU")));
    }
    // SAFETY: the kernel filled the mtu member.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

/// The flags of interface `name` (`SIOCGIFFLAGS`) in the network namespace of socket `fd`.
fn flags_by(fd: RawFd, name: &str) -> io::Result<i32> {
    let mut r = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifru_flags of the ifreq we own.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut r) } != 0 {
        return Err(last_error(&format!("{name}: reading its flags")));
    }
    // SAFETY: the kernel filled the flags member.
    Ok(i32::from(unsafe { r.ifr_ifru.ifru_flags } as u16))
}

/// Whether an interface can send: the kernel's qdisc is attached only while it is up and has a
/// carrier (`dev_activate` at `dev_open` and at `linkwatch`'s carrier on; `dev_deactivate`, which
/// puts `noop_qdisc` in its place, at either's loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Up,
    /// Set down (`IFF_UP` clear).
    Down,
    /// Up without a carrier (a veth whose other end is down).
    NoCarrier,
}

/// The state of interface `name` in the network namespace of socket `fd` (see [`mtu_by`]). The
/// carrier is the driver's (`ETHTOOL_GLINK`: `netif_carrier_ok` on a veth), not `IFF_RUNNING`,
/// which follows the operational state that `linkwatch` sets later: a device opened with its
/// carrier on has its qdisc at once (`dev_open` → `dev_activate`) but is not `RUNNING` until then.
/// A driver without `get_link` is judged by `IFF_RUNNING`.
pub fn link_state_by(fd: RawFd, name: &str) -> io::Result<LinkState> {
    const ETHTOOL_GLINK: u32 = 0x0a;
    let flags = flags_by(fd, name)?;
    let carrier = match ethtool_by(fd, name, ETHTOOL_GLINK, 0) {
        Ok(link) => link != 0,
        Err(_) => flags & libc::IFF_RUNNING != 0,
    };
    Ok(if flags & libc::IFF_UP == 0 {
        LinkState::Down
    } else if !carrier {
        LinkState::NoCarrier
    } else {
        LinkState::Up
    })
}

/// A netlink socket that hears of every change to the interfaces of the network namespace it was
/// opened in (`RTMGRP_LINK`: `ip link set DEV mtu N`, up, down), non-blocking. The bridge only
/// needs to know that something changed: it reads what it needs (the MTU) from its own sockets.
pub struct LinkEvents {
    fd: OwnedFd,
}

impl LinkEvents {
    /// Listen to this network namespace's link changes (no privilege needed).
    pub fn open() -> io::Result<LinkEvents> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(last_error("netlink socket"));
        }
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain old data; all zeroes is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = libc::RTMGRP_LINK as u32;
        bind(
            fd.as_raw_fd(),
            &sa,
            "binding a netlink socket to RTMGRP_LINK",
        )?;
        Ok(LinkEvents { fd })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Read every waiting message; whether there was one. An overflowing socket (`ENOBUFS`: changes
    /// were lost) counts as one, so that the caller looks again.
    pub fn changed(&self) -> bool {
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: recv into the buffer we own, of its length.
            let r = unsafe {
                libc::recv(
                    self.raw(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                any = true;
                continue;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                any = true;
                continue;
            }
            return any;
        }
    }
}

/// Can `name` be one of a bridge's ports? It must exist, be an Ethernet device other than loopback
/// (`br_add_if`'s rule: frames are read and sent with their Ethernet header, which an L3 device such
/// as a tun or wireguard has not, and what is sent out of `lo` comes straight back in), be up, and
/// not be a port of a kernel bridge (or bond) already: the kernel would forward its frames too, and
/// every frame would arrive twice.
pub fn check_bridgeable(name: &str) -> Result<(), String> {
    ifindex(name).map_err(|e| e.to_string())?;
    let s = ioctl_socket().map_err(|e| e.to_string())?;
    let flags = flags_by(s.as_raw_fd(), name).map_err(|e| e.to_string())?;
    if flags & libc::IFF_LOOPBACK != 0 {
        return Err(format!(
            "{name} is a loopback device: what tclab sent out of it would come straight back in"
        ));
    }
    let mut r = ifreq(name).map_err(|e| e.to_string())?;
    // SAFETY: SIOCGIFHWADDR reads the name and writes ifru_hwaddr of the ifreq we own.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR, &mut r) } != 0 {
        return Err(last_error(&format!("{name}: reading its link type")).to_string());
    }
    // SAFETY: the kernel filled the hwaddr member; its family is the device's ARPHRD_ type.
    let link = unsafe { r.ifr_ifru.ifru_hwaddr.sa_family };
    if link != libc::ARPHRD_ETHER {
        return Err(format!(
            "{name} is not an Ethernet device (link type {link}; ip -d link show dev {name}): \
             tclab live bridges Ethernet frames, as the kernel's bridge does"
        ));
    }
    if flags & libc::IFF_UP == 0 {
        return Err(format!("{name} is down: ip link set dev {name} up first"));
    }
    if let Ok(master) = std::fs::read_link(format!("/sys/class/net/{name}/master")) {
        let m = master
            .file_name()
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(format!(
            "{name} is a port of {m}: the kernel bridges it already (ip link set dev {name} nomaster)"
        ));
    }
    Ok(())
}

/// A qdisc the kernel has on an interface, as its `RTM_GETQDISC` dump gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelQdisc {
    pub kind: String,
    pub handle: tclab_core::Handle,
    pub parent: tclab_core::Handle,
}

/// The qdiscs an admin gave interface `name` in this network namespace (`tc qdisc add dev NAME …`):
/// those of the kernel's dump with a handle. The ones the kernel attaches by itself (`dev_activate`:
/// pfifo_fast, fq_codel, noqueue, a multiqueue device's mq and its children) have handle 0, and an
/// admin's never has (`qdisc_alloc_handle` gives one from 8001: when none is asked for).
pub fn kernel_qdiscs(name: &str) -> io::Result<Vec<KernelQdisc>> {
    const RTM_NEWQDISC: u16 = 36;
    const RTM_GETQDISC: u16 = 38;
    const TCA_KIND: u16 = 1;
    let index = ifindex(name)?;
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(last_error("netlink socket"));
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // nlmsghdr (16 bytes) then tcmsg (20): a dump of every qdisc; tcm_ifindex names the device
    // (older kernels dump them all: the answers are filtered below as well).
    let mut req = [0u8; 36];
    req[0..4].copy_from_slice(&36u32.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = libc::AF_UNSPEC as u8;
    req[20..24].copy_from_slice(&index.to_ne_bytes());
    // SAFETY: send from the buffer we own, of its length.
    let r = unsafe {
        libc::send(
            fd.as_raw_fd(),
            req.as_ptr() as *const libc::c_void,
            req.len(),
            0,
        )
    };
    if r < 0 {
        return Err(last_error(
            "asking the kernel for its qdiscs (RTM_GETQDISC)",
        ));
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let u16_at = |b: &[u8], i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    loop {
        // SAFETY: recv into the buffer we own, of its length.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            return Err(last_error("reading the kernel's qdiscs (RTM_GETQDISC)"));
        }
        let b = &buf[..n as usize];
        let mut at = 0;
        while at + 16 <= b.len() {
            let len = u32_at(b, at) as usize;
            if len < 16 || at + len > b.len() {
                return Err(io::Error::other(
                    "a malformed netlink answer to RTM_GETQDISC",
                ));
            }
            let msg = &b[at..at + len];
            match u16_at(msg, 4) {
                t if t == libc::NLMSG_DONE as u16 => return Ok(out),
                t if t == libc::NLMSG_ERROR as u16 && len >= 20 => {
                    let errno = -(u32_at(msg, 16) as i32);
                    if errno != 0 {
                        let e = io::Error::from_raw_os_error(errno);
                        return Err(io::Error::new(e.kind(), format!("RTM_GETQDISC: {e}")));
                    }
                }
                RTM_NEWQDISC if len >= 36 && u32_at(msg, 20) as i32 == index => {
                    let handle = tclab_core::Handle(u32_at(msg, 24));
                    let parent = tclab_core::Handle(u32_at(msg, 28));
                    let mut kind = String::new();
                    let mut a = 36;
                    while a + 4 <= len {
                        let alen = u16_at(msg, a) as usize;
                        if alen < 4 || a + alen > len {
                            break;
                        }
                        if u16_at(msg, a + 2) == TCA_KIND {
                            let v = &msg[a + 4..a + alen];
                            let v = v.split(|&c| c == 0).next().unwrap_or_default();
                            kind = String::from_utf8_lossy(v).into_owned();
                        }
                        a += (alen + 3) & !3;
                    }
                    if handle.major() != 0 {
                        out.push(KernelQdisc {
                            kind,
                            handle,
                            parent,
                        });
                    }
                }
                _ => {}
            }
            at += (len + 3) & !3;
        }
    }
}

/// The offloads that hand a shaper super-packets (or hand the wire frames without checksums): each
/// (name, `ETHTOOL_G*`, `ETHTOOL_S*`).
pub const OFFLOADS: &[(&str, u32, u32)] = &[
    ("gro", 0x2b, 0x2c),
    ("tso", 0x1e, 0x1f),
    ("gso", 0x23, 0x24),
    ("tx-checksum", 0x16, 0x17),
];
/// `ETHTOOL_GFLAGS`/`SFLAGS` and their LRO bit.
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETH_FLAG_LRO: u32 = 1 << 15;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

fn ethtool(name: &str, cmd: u32, data: u32) -> io::Result<u32> {
    ethtool_by(ioctl_socket()?.as_raw_fd(), name, cmd, data)
}

/// An ethtool command on interface `name` in the network namespace of socket `fd`.
fn ethtool_by(fd: RawFd, name: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut v = EthtoolValue { cmd, data };
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_data = &mut v as *mut EthtoolValue as *mut libc::c_char;
    // SAFETY: SIOCETHTOOL reads `v` through ifru_data, which lives across the call.
    if unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut r) } != 0 {
        return Err(last_error(&format!("{name}: ethtool command {cmd:#x}")));
    }
    Ok(v.data)
}

/// Turn off LRO, GRO, TSO, GSO and transmit checksumming on `name`; the names of those that were on
/// and are now off. Offloads a device does not have (or cannot change) are skipped. One that is on
/// and that this process may not change (no `CAP_NET_ADMIN`: reading needs none) is an error, with
/// what was turned off turned back on: skipped, it would be said to be off while super-packets
/// reached the shaper.
pub fn offloads_off(name: &str) -> io::Result<Vec<&'static str>> {
    ifindex(name)?;
    let mut turned = Vec::new();
    let mut turn_off = |what: &'static str, r: io::Result<u32>| match r {
        Ok(_) => {
            turned.push(what);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err((what, e)),
        Err(_) => Ok(()),
    };
    let mut r = Ok(());
    if let Ok(flags) = ethtool(name, ETHTOOL_GFLAGS, 0) {
        if flags & ETH_FLAG_LRO != 0 {
            r = turn_off("lro", ethtool(name, ETHTOOL_SFLAGS, flags & !ETH_FLAG_LRO));
        }
    }
    for &(what, get, set) in OFFLOADS {
        if r.is_ok() && ethtool(name, get, 0).is_ok_and(|on| on != 0) {
            r = turn_off(what, ethtool(name, set, 0));
        }
    }
    if let Err((what, e)) = r {
        let _ = offloads_on(name, &turned);
        return Err(io::Error::new(
            e.kind(),
            format!(
                "{name}: {what} is on and cannot be turned off ({e}): offloads hand a shaper \
                 super-packets, and turning them off needs CAP_NET_ADMIN (run tclab as root)"
            ),
        ));
    }
    Ok(turned)
}

/// The offloads of `name` that are on, by the names [`offloads_off`] uses.
pub fn offloads_on_now(name: &str) -> io::Result<Vec<&'static str>> {
    ifindex(name)?;
    let mut on = Vec::new();
    if ethtool(name, ETHTOOL_GFLAGS, 0).is_ok_and(|f| f & ETH_FLAG_LRO != 0) {
        on.push("lro");
    }
    for &(what, get, _) in OFFLOADS {
        if ethtool(name, get, 0).is_ok_and(|v| v != 0) {
            on.push(what);
        }
    }
    Ok(on)
}

/// Turn back on the offloads `turned` names (what [`offloads_off`] turned off), in the reverse order:
/// TSO needs transmit checksumming on first. Each is tried; the first failure is returned.
pub fn offloads_on(name: &str, turned: &[&str]) -> io::Result<()> {
    let mut first = Ok(());
    for &what in turned.iter().rev() {
        let r = if what == "lro" {
            ethtool(name, ETHTOOL_GFLAGS, 0)
                .and_then(|flags| ethtool(name, ETHTOOL_SFLAGS, flags | ETH_FLAG_LRO))
        } else if let Some(&(_, _, set)) = OFFLOADS.iter().find(|o| o.0 == what) {
            ethtool(name, set, 1)
        } else {
            Ok(0)
        };
        if let (Err(e), Ok(())) = (r, &first) {
            first = Err(e);
        }
    }
    first
}

/// A keeper that turns offloads back on once this process is gone, however it ends (stopped, killed,
/// crashed): a forked child holding the read end of a pipe whose write end only this process has. It
/// is started before any offload is touched and told of each change as it is made ([`Keeper::note`]),
/// so no crash leaves a device changed behind it; when the pipe closes it restores what it was told
/// and exits. It keeps CAP_NET_ADMIN alone of this process's privileges, reads no frame, and has no
/// other descriptor. Start it before any thread (fork copies the calling thread only).
pub struct Keeper {
    /// The pipe's write end, open for as long as this process lives.
    fd: RawFd,
}

impl Keeper {
    pub fn start() -> io::Result<Keeper> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(last_error("pipe2"));
        }
        // SAFETY: fork in a process with one thread (the caller's contract); the child only makes
        // system calls and the restore, and leaves through _exit.
        match unsafe { libc::fork() } {
            -1 => Err(last_error("fork")),
            0 => {
                let told = keeper_listen(fds[0]);
                for line in told.lines() {
                    if let Some((dev, what)) = line.split_once(' ') {
                        let names: Vec<&str> = what.split(',').collect();
                        let _ = offloads_on(dev, &names);
                    }
                }
                // SAFETY: leaves the child at once, without running the parent's exit handlers.
                unsafe { libc::_exit(0) }
            }
            _ => {
                // SAFETY: the read end is the keeper's.
                unsafe { libc::close(fds[0]) };
                Ok(Keeper { fd: fds[1] })
            }
        }
    }

    /// The offloads `turned` were turned off on `dev`: the keeper turns them back on at the end.
    pub fn note(&self, dev: &str, turned: &[&str]) -> io::Result<()> {
        if turned.is_empty() {
            return Ok(());
        }
        let line = format!("{dev} {}\n", turned.join(","));
        // SAFETY: writes the bytes of a string we own; a line is far below PIPE_BUF, so it is atomic.
        let r = unsafe { libc::write(self.fd, line.as_ptr() as *const libc::c_void, line.len()) };
        if r != line.len() as isize {
            return Err(last_error("telling the offload keeper"));
        }
        Ok(())
    }
}

/// The keeper's side until the pipe at `fd` closes: what it was told, line by line.
fn keeper_listen(fd: RawFd) -> String {
    let mut told = Vec::new();
    // SAFETY: plain system calls on this child's descriptors and signal dispositions.
    unsafe {
        // A Ctrl-C or a SIGTERM to the bridge's process group must not end the keeper first.
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(256, 65_536) as libc::c_int;
        for other in 3..max {
            if other != fd {
                libc::close(other);
            }
        }
        // Of this process's privileges the keeper needs CAP_NET_ADMIN (12) alone.
        keep_only_cap(12);
        let mut b = [0u8; 256];
        loop {
            let r = libc::read(fd, b.as_mut_ptr() as *mut libc::c_void, b.len());
            if r > 0 {
                told.extend_from_slice(&b[..r as usize]);
            } else if r == 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
    }
    String::from_utf8_lossy(&told).into_owned()
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The CPU time the calling thread has run, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; the thread CPU clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleep `ns` nanoseconds on `CLOCK_MONOTONIC`, whatever arrives meanwhile.
pub fn pause_ns(ns: u64) {
    let t = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: clock_nanosleep reads the timespec we own; no remainder is asked for.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &t, std::ptr::null_mut()) };
}

/// Make the thread's sleeps end when asked (the default slack of 50 µs lets `ppoll` overshoot by that
/// much and more, which a shaper sending a frame every 12 µs cannot afford).
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Run the calling thread under `SCHED_FIFO` at a low real-time priority, so that a busy machine (a
/// compiler on every core) does not delay its wake-ups by milliseconds, as the kernel's own timers and
/// softirqs are not delayed. Bounded by the kernel's real-time throttling (95 % of each second by
/// default). False if not permitted.
pub fn realtime() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on this thread (pid 0) with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

/// Whether the calling thread runs under `SCHED_FIFO` ([`realtime`] succeeded on it).
pub fn is_realtime() -> bool {
    // SAFETY: sched_getscheduler on this thread (pid 0) has no other argument.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_FIFO }
}

/// Keep thread `tid` (0: the calling thread) on CPU `cpu` alone (`sched_setaffinity`): for
/// measurements that give the bridge a core and its traffic source the other.
pub fn pin_to_cpu(tid: i32, cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu}: past the {} a CPU set holds", libc::CPU_SETSIZE),
        ));
    }
    // SAFETY: cpu_set_t is plain old data; CPU_SET stays within it for cpu < CPU_SETSIZE (above).
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(last_error(&format!("pinning thread {tid} to CPU {cpu}")));
    }
    Ok(())
}

/// The CPUs thread `tid` (0: the calling thread) may run on (`sched_getaffinity`), in order: on a
/// machine or container whose CPUs are not 0, 1, … (a cpuset), the ones [`pin_to_cpu`] can take.
pub fn allowed_cpus(tid: i32) -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain old data; the kernel writes at most its size; CPU_ISSET reads
    // within it for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(last_error(&format!("the CPUs thread {tid} may run on")));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Keep capability `cap` alone, for good (best effort: a process without the others already is fine).
fn keep_only_cap(cap: u32) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    for c in (0..64).filter(|&c| c != 8 && c != cap).chain([8]) {
        // SAFETY: prctl with integer arguments; EINVAL for capabilities this kernel does not have.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, c as libc::c_ulong, 0, 0, 0) };
    }
    let _ = capset([1u32 << cap, 0]);
}

/// `capset` of this process: `effective` = `permitted` = the two words of `caps`, nothing inheritable.
fn capset(caps: [u32; 2]) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3: two Data words
        pid: 0,
    };
    let data = caps.map(|c| Data {
        effective: c,
        permitted: c,
        inheritable: 0,
    });
    // SAFETY: capset reads a version-3 header and two data words we own.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) } != 0 {
        return Err(last_error("capset"));
    }
    Ok(())
}

/// Give up every capability, for good: the sockets are open, the offloads set, the scheduling class
/// chosen, so a bridge that a hostile frame subverted could do no more than any unprivileged process
/// (`PR_SET_NO_NEW_PRIVS`, the bounding set emptied, then effective, permitted and inheritable sets
/// cleared with `capset`, which clears the ambient set too).
pub fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(last_error("PR_SET_NO_NEW_PRIVS"));
    }
    // CAP_SETPCAP (8), needed to drop the others from the bounding set, goes last.
    for cap in (0..64).filter(|&c| c != 8).chain([8]) {
        // SAFETY: prctl with integer arguments; EINVAL for capabilities this kernel does not have.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    }
    capset([0, 0])
}

/// A non-blocking AF_PACKET socket bound to interface `name` for `protocol` (network order: ETH_P_ALL
/// receives every frame, 0 none), and the interface's index.
fn bound_socket(name: &str, protocol: u16) -> io::Result<(OwnedFd, i32)> {
    let ifindex = ifindex(name)?;
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            protocol as libc::c_int,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("{name}: cannot open a packet socket: {e} (tclab live needs CAP_NET_RAW: run it as root)"),
        ));
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol;
    sll.sll_ifindex = ifindex;
    bind(fd.as_raw_fd(), &sll, &format!("{name}: bind"))?;
    Ok((fd, ifindex))
}

/// An AF_PACKET socket on one interface: promiscuous, non-blocking, deaf to the frames it sends, its
/// frames sent straight to the driver.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifindex: i32,
    /// Frames received by `recv_batch` whose checksum was left to a device (see
    /// [`PacketSocket::take_partial`]), since the last look.
    partial: std::cell::Cell<u64>,
    /// Which frames of the last `recv_batch` those were, bit by bit (`BATCH` is 64).
    partial_mask: std::cell::Cell<u64>,
}

impl PacketSocket {
    pub fn open(name: &str) -> io::Result<PacketSocket> {
        let (fd, ifindex) = bound_socket(name, ETH_P_ALL_BE)?;
        let raw = fd.as_raw_fd();
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
            &format!("{name}: promiscuous mode"),
        )?;
        let one: libc::c_int = 1;
        setsockopt(
            raw,
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &one,
            &format!("{name}: PACKET_IGNORE_OUTGOING"),
        )?;
        setsockopt(
            raw,
            libc::SOL_PACKET,
            PACKET_AUXDATA,
            &one,
            &format!("{name}: PACKET_AUXDATA"),
        )?;
        setsockopt(
            raw,
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            &one,
            &format!("{name}: PACKET_QDISC_BYPASS"),
        )?;
        // Room for a burst while the loop is busy elsewhere (as root, past rmem_max).
        let size: libc::c_int = 8 << 20;
        let _ = setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &size,
            "SO_RCVBUFFORCE",
        );
        let _ = setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &size,
            "SO_SNDBUFFORCE",
        );
        Ok(PacketSocket {
            fd,
            ifindex,
            partial: std::cell::Cell::new(0),
            partial_mask: std::cell::Cell::new(0),
        })
    }

    /// Join fanout group `group` of this network namespace with `PACKET_FANOUT_HASH`: the kernel hands
    /// each frame that arrives on the interface to one socket of the group, chosen by the frame's flow
    /// hash (`skb_get_hash`), so that a flow keeps to one socket (one thread) and its order.
    pub fn join_fanout(&self, group: u16) -> io::Result<()> {
        const PACKET_FANOUT: libc::c_int = 18;
        const PACKET_FANOUT_HASH: libc::c_int = 0;
        let arg: libc::c_int = group as libc::c_int | (PACKET_FANOUT_HASH << 16);
        setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_FANOUT,
            &arg,
            "PACKET_FANOUT",
        )
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How many frames `recv_batch` has received since the last call whose transport checksum is
    /// not filled in (`TP_STATUS_CSUMNOTREADY`: the sender left it to its device's offload, as a
    /// veth's other end does with tx-checksumming on; a real NIC's frames come complete).
    pub fn take_partial(&self) -> u64 {
        self.partial.replace(0)
    }

    /// Whether frame `i` of the last `recv_batch` was one of those.
    pub fn partial_in_batch(&self, i: usize) -> bool {
        i < 64 && self.partial_mask.get() >> i & 1 != 0
    }

    /// The frames the kernel dropped for this socket since the last call because its receive ring or
    /// buffer was full (`PACKET_STATISTICS`' `tp_drops`; reading resets the kernel's counts): frames
    /// the interface received that the bridge never saw.
    pub fn take_drops(&self) -> io::Result<u64> {
        const PACKET_STATISTICS: libc::c_int = 6;
        // `struct tpacket_stats` (TPACKET_V1 and V2 sockets): packets, drops.
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into the array we own.
        let r = unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 {
            return Err(last_error("PACKET_STATISTICS"));
        }
        Ok(st[1] as u64)
    }

    /// Receive up to `bufs.len()` frames without waiting; each buffer's frame length (the frame's real
    /// length: larger than the buffer when truncated) in `lens`. Returns how many arrived.
    ///
    /// A frame's outer VLAN tag is not in its bytes: Linux moved it into the skb's metadata on receive
    /// (`skb_vlan_untag`), and the socket reports it beside the frame (`PACKET_AUXDATA`): in `tags`, as
    /// (TPID, TCI), `None` for an untagged frame.
    pub fn recv_batch(
        &self,
        bufs: &mut [Vec<u8>],
        lens: &mut [usize],
        tags: &mut [Option<(u16, u16)>],
    ) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(tags.len()).min(BATCH);
        // Room for one PACKET_AUXDATA message per frame, aligned as cmsghdr wants.
        let mut control = [[0u64; 8]; BATCH];
        let mut iov: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: mmsghdr is plain old data.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i] = libc::iovec {
                iov_base: bufs[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: bufs[i].len(),
            };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = control[i].as_mut_ptr() as *mut libc::c_void;
            msgs[i].msg_hdr.msg_controllen = std::mem::size_of_val(&control[i]) as _;
        }
        // SAFETY: every msghdr points at an iovec over a live buffer of the length given; MSG_TRUNC
        // makes the kernel report a frame's real length without writing past the buffer.
        let r = unsafe {
            libc::recvmmsg(
                self.raw(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let mut mask = 0u64;
        for i in 0..r as usize {
            lens[i] = msgs[i].msg_len as usize;
            let status = aux_status(&msgs[i].msg_hdr);
            tags[i] = status.and_then(|(s, tci, tpid)| vlan_tag(s, tci, tpid));
            if status.is_some_and(|(s, _, _)| s & TP_STATUS_CSUMNOTREADY != 0) {
                self.partial.set(self.partial.get() + 1);
                mask |= 1 << i;
            }
        }
        self.partial_mask.set(mask);
        Ok(r as usize)
    }

    /// Send `frames` in order without waiting; returns how many the kernel took (the rest: try again
    /// when the socket is writable).
    pub fn send_batch(&self, frames: &[Vec<u8>]) -> io::Result<usize> {
        let mut sent = 0;
        while sent < frames.len() {
            let n = (frames.len() - sent).min(BATCH);
            let mut iov: [libc::iovec; BATCH] = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; BATCH];
            // SAFETY: mmsghdr is plain old data.
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for i in 0..n {
                let f = &frames[sent + i];
                iov[i] = libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                };
                msgs[i].msg_hdr.msg_iov = &mut iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: every msghdr points at an iovec over a live frame; the kernel only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    self.raw(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(sent),
                    _ => Err(e),
                };
            }
            sent += r as usize;
            if (r as usize) < n {
                break;
            }
        }
        Ok(sent)
    }
}

/// A received message's `PACKET_AUXDATA`: its status bits, VLAN TCI and TPID.
fn aux_status(msg: &libc::msghdr) -> Option<(u32, u16, u16)> {
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of cmsghdrs; CMSG_FIRSTHDR and
    // CMSG_NXTHDR stay within them, and the data read is checked against the header's length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let data_len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
            if (*c).cmsg_level == libc::SOL_PACKET
                && (*c).cmsg_type == PACKET_AUXDATA
                && data_len >= std::mem::size_of::<libc::tpacket_auxdata>()
            {
                let aux =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::tpacket_auxdata);
                return Some((aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
        None
    }
}

/// The error pending on socket `fd` (`SO_ERROR`, which clears it), if any: how a socket whose
/// frames come through a ring, never by a call that would return it, learns that its interface went
/// away (`ENETDOWN`).
pub fn socket_error(fd: RawFd) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the int we own.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(last_error("SO_ERROR"));
    }
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err));
    }
    Ok(())
}

/// The index of the interface packet socket `fd` is bound to (`getsockname`): the kernel sets it
/// to -1 when the interface is deleted (`packet_notifier` on `NETDEV_UNREGISTER`), and keeps it
/// while the interface is merely down — whichever network namespace the caller is in.
pub fn bound_ifindex(fd: RawFd) -> io::Result<i32> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into the sockaddr_ll we own.
    let r = unsafe {
        libc::getsockname(
            fd,
            &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
            &mut len,
        )
    };
    if r != 0 {
        return Err(last_error("getsockname"));
    }
    Ok(sll.sll_ifindex)
}

/// Frames a batch call moves at most.
pub const BATCH: usize = 64;

/// Wait until one of `fds` is readable (or writable, for those given in `write`), a signal arrives, or
/// `timeout_ns` passes (`None`: no limit). Returns the readable ones' positions.
pub fn wait(fds: &[RawFd], write: &[bool], timeout_ns: Option<u64>) -> io::Result<Vec<usize>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .zip(write.iter().chain(std::iter::repeat(&false)))
        .map(|(&fd, &w)| libc::pollfd {
            fd,
            events: libc::POLLIN | if w { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    // SAFETY: the pollfd array and the timespec live across the call.
    let r = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            ts.as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec),
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Vec::new());
        }
        return Err(e);
    }
    Ok(p.iter()
        .enumerate()
        .filter(|(_, q)| q.revents != 0)
        .map(|(i, _)| i)
        .collect())
}

/// SIGINT, SIGTERM and SIGHUP set this; the loop ends at its next turn.
pub static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make SIGINT, SIGTERM and SIGHUP ask the loop to stop (and end any `ppoll` at once). SIGHUP (the
/// terminal that ran it closed, an SSH session dropped) would otherwise end it at once, without its
/// summary, `--out`'s plots and tc.txt, or the removal of its control socket.
pub fn stop_on_signals() {
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; no SA_RESTART, so
        // a wait in progress returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Run `f` inside the network namespace at `path` (`/run/netns/NAME`), then return to this one. The
/// calling thread switches, so `f` must not start threads that outlive it.
pub fn in_netns<T>(path: &str, f: impl FnOnce() -> T) -> io::Result<T> {
    let here = std::fs::File::open("/proc/thread-self/ns/net")
        .map_err(|e| io::Error::new(e.kind(), format!("/proc/thread-self/ns/net: {e}")))?;
    let there =
        std::fs::File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    // SAFETY: setns with a namespace descriptor we hold open.
    if unsafe { libc::setns(there.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(last_error(&format!("entering {path}")));
    }
    let out = f();
    // SAFETY: as above, back to the namespace we came from.
    if unsafe { libc::setns(here.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(last_error("returning to the original network namespace"));
    }
    Ok(out)
}

/// An eventfd one thread writes to wake another out of its [`wait`].
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain eventfd(2); the descriptor is owned at once.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(last_error("eventfd"));
        }
        // SAFETY: fd is a fresh descriptor nothing else owns.
        Ok(Waker {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Make the descriptor readable (a waiting [`wait`] returns).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a u64 we own; a full counter (EAGAIN) is already a wake-up.
        unsafe { libc::write(self.raw(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Take the wake-ups given so far.
    pub fn clear(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads 8 bytes into a u64 we own; nonblocking, EAGAIN when there is none.
        unsafe { libc::read(self.raw(), &mut n as *mut u64 as *mut libc::c_void, 8) };
    }
}

/// `PACKET_VERSION`, `PACKET_RX_RING`, `PACKET_TX_RING` and `PACKET_LOSS` (`linux/if_packet.h`).
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
/// `TPACKET_V2`'s value for `PACKET_VERSION`.
const TPACKET_V2: libc::c_int = 1;
/// `tp_status` of a receive slot: the user's (else the kernel's, 0).
const TP_STATUS_USER: u32 = 1 << 0;
/// `tp_status` of a transmit slot: free (the user may fill it), or filled and to be sent.
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
/// Where a transmit slot's frame starts without `PACKET_TX_HAS_OFF`: `TPACKET2_HDRLEN -
/// sizeof(struct sockaddr_ll)` = 52 − 20.
const TX_DATA_OFFSET: usize = 32;
/// `tp_status` bits of a received frame: the VLAN fields are valid.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `tp_status` of a received frame: its transport checksum is left to a device (CHECKSUM_PARTIAL).
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// `sizeof(struct tpacket2_hdr)`: status, len, snaplen (u32), mac, net (u16), sec, nsec (u32),
/// vlan_tci, vlan_tpid (u16), 4 bytes of padding.
const TPACKET2_HDR: usize = 32;

/// The shape of a `PACKET_RX_RING` or `PACKET_TX_RING` (`struct tpacket_req`): `frames` slots of
/// `frame_size` bytes, in blocks of `block_size` bytes (a multiple of the page size, whole slots each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    pub block_size: u32,
    pub frame_size: u32,
    pub frames: u32,
}

impl RingGeometry {
    /// Room for about `bytes` of frames, each slot large enough for a frame of `mtu` with its link
    /// header, two VLAN tags and the kernel's header in front (a received frame starts 66 bytes into
    /// its slot: `TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14`; a sent one at 32). Slots are a power of
    /// two of at least 2 KiB, so they divide the 64 KiB blocks (or make a block each).
    pub fn for_mtu(mtu: u32, bytes: u32) -> RingGeometry {
        let frame_size = (mtu.saturating_add(14 + 8 + 96))
            .checked_next_power_of_two()
            .unwrap_or(1 << 31)
            .max(2048);
        let block_size = frame_size.max(1 << 16);
        let blocks = (bytes / block_size).max(4);
        RingGeometry {
            block_size,
            frame_size,
            frames: blocks * (block_size / frame_size),
        }
    }
}

/// One frame in a receive ring slot, read through [`slot_view`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFrame<'a> {
    /// The bytes the ring holds (`tp_snaplen` of them).
    pub data: &'a [u8],
    /// The frame's length on the wire (`tp_len`): larger than `data` when the slot cut it.
    pub len: usize,
    /// The accelerated VLAN tag (TPID, TCI), as [`PacketSocket::recv_batch`] reports it.
    pub vlan: Option<(u16, u16)>,
    /// Its transport checksum is not filled in (see [`PacketSocket::take_partial`]).
    pub csum_partial: bool,
}

impl RingFrame<'_> {
    /// Whether the slot was too small for the frame.
    pub fn truncated(&self) -> bool {
        self.len > self.data.len()
    }
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The frame a `TPACKET_V2` ring slot holds, every field checked against the slot's bytes: `None` for a
/// slot too short for its header, a frame that would start inside the header or end past the slot,
/// or a wire length shorter than what was captured. Nothing here can panic, whatever the bytes.
pub fn slot_view(slot: &[u8]) -> Option<RingFrame<'_>> {
    let status = ne_u32(slot, 0)?;
    let len = ne_u32(slot, 4)? as usize;
    let snaplen = ne_u32(slot, 8)? as usize;
    let mac = ne_u16(slot, 12)? as usize;
    if mac < TPACKET2_HDR || len < snaplen {
        return None;
    }
    let data = slot.get(mac..mac.checked_add(snaplen)?)?;
    let vlan = vlan_tag(status, ne_u16(slot, 24)?, ne_u16(slot, 26)?);
    Some(RingFrame {
        data,
        len,
        vlan,
        csum_partial: status & TP_STATUS_CSUMNOTREADY != 0,
    })
}

/// The accelerated VLAN tag as (TPID, TCI) from a frame's status bits and VLAN fields (auxdata's or a
/// ring slot's, alike): none unless `TP_STATUS_VLAN_VALID`; a kernel that does not report the TPID
/// (`TP_STATUS_VLAN_TPID_VALID` unset) had 802.1Q's.
fn vlan_tag(status: u32, tci: u16, tpid: u16) -> Option<(u16, u16)> {
    if status & TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
        tpid
    } else {
        0x8100
    };
    Some((tpid, tci))
}

/// A `TPACKET_V2` ring (receive or transmit) mapped into this process: slots the kernel and this
/// process hand each other by the status word each starts with, taken in order from `head`.
///
/// Invariants: `map` is a live mapping of `map_len` bytes, blocks of `block_size` bytes back to back,
/// each holding `per_block` slots of `frame_size` bytes from its start (the shape the kernel
/// accepted), for as long as the value lives; `head` < `frames`; a slot's bytes other than its status
/// word are touched only while its status says it is this process's.
struct Ring {
    map: *mut u8,
    map_len: usize,
    block_size: usize,
    per_block: usize,
    frame_size: usize,
    frames: usize,
    head: usize,
}

// SAFETY: the mapping is owned by this value alone (no copy of the pointer exists); moving it to
// another thread moves that ownership.
unsafe impl Send for Ring {}

impl Ring {
    /// Make socket `fd` a `TPACKET_V2` ring of shape `g` (`opt`: `PACKET_RX_RING` or
    /// `PACKET_TX_RING`) and map it. An error names the step the kernel refused.
    fn new(fd: RawFd, opt: libc::c_int, what: &str, g: RingGeometry) -> io::Result<Ring> {
        #[repr(C)]
        struct TpacketReq {
            block_size: u32,
            block_nr: u32,
            frame_size: u32,
            frame_nr: u32,
        }
        setsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_VERSION,
            &TPACKET_V2,
            "PACKET_VERSION TPACKET_V2",
        )?;
        let per_block = g.block_size.checked_div(g.frame_size).unwrap_or(0);
        let req = TpacketReq {
            block_size: g.block_size,
            block_nr: g.frames.checked_div(per_block).unwrap_or(0),
            frame_size: g.frame_size,
            frame_nr: g.frames,
        };
        setsockopt(fd, libc::SOL_PACKET, opt, &req, what)?;
        // The kernel accepted the shape: frames = per_block * block_nr, and a slot never spans blocks.
        let map_len = req.block_size as usize * req.block_nr as usize;
        // SAFETY: maps the ring the kernel just made for this socket, shared, of the length it has.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let e = last_error(&format!("mmap of the {what}"));
            // Take the ring back off the socket (a request of no blocks frees it): a socket left
            // with an unmapped receive ring would have the kernel fill the ring, and recvmmsg, the
            // fallback, would never see a frame.
            let none = TpacketReq {
                block_size: 0,
                block_nr: 0,
                frame_size: 0,
                frame_nr: 0,
            };
            setsockopt(
                fd,
                libc::SOL_PACKET,
                opt,
                &none,
                &format!("freeing the {what}"),
            )
            .map_err(|f| io::Error::new(f.kind(), format!("{e}; {f}")))?;
            return Err(e);
        }
        Ok(Ring {
            map: map as *mut u8,
            map_len,
            block_size: g.block_size as usize,
            per_block: per_block as usize,
            frame_size: g.frame_size as usize,
            frames: g.frames as usize,
            head: 0,
        })
    }

    /// Where slot `i` starts in the mapping: its block's start, then whole slots before it.
    fn slot_offset(&self, i: usize) -> usize {
        (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size
    }

    /// The status word of the slot at `head`, shared with the kernel.
    fn status(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: slot `head` lies within the mapping (head < frames) and starts 16-byte aligned
        // (block and frame sizes are multiples of TPACKET_ALIGNMENT, the mapping page-aligned); the
        // kernel writes the word too, hence an atomic.
        unsafe {
            &*(self.map.add(self.slot_offset(self.head)) as *const std::sync::atomic::AtomicU32)
        }
    }

    /// The bytes of the slot at `head`. The caller owns the slot (its status says so) until it sets
    /// the status again.
    fn slot(&mut self) -> &mut [u8] {
        // SAFETY: the slot lies within the mapping, and while it is this process's (the caller's
        // contract) the kernel does not touch its bytes; `&mut self` makes the slice the only one.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.add(self.slot_offset(self.head)),
                self.frame_size,
            )
        }
    }

    /// Hand the slot at `head` to the other side with `status` and move on. Release: the slot's
    /// bytes, written or read before, are done with once the other side sees the status.
    fn hand_over(&mut self, status: u32) {
        self.status()
            .store(status, std::sync::atomic::Ordering::Release);
        self.head = (self.head + 1) % self.frames;
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice of it outlives a `&mut self`.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// A `TPACKET_V2` receive ring (`PACKET_RX_RING`, Documentation/networking/packet_mmap.rst) on a
/// packet socket: the kernel writes each arriving frame into the next slot and hands the slot over by
/// setting `TP_STATUS_USER` in its first word; the bridge reads it in place and hands it back by
/// writing `TP_STATUS_KERNEL` (0). No system call per batch, no copy out of the kernel beyond the
/// ring's own. V2, not V3: V3 hands frames over a block at a time, and a block that does not fill is
/// retired only by a timeout of at least 1 ms — that much latency per frame at low rates.
pub struct RxRing {
    ring: Ring,
}

impl RxRing {
    /// Give `sock` a receive ring of shape `g`. Call it before joining a fanout group.
    pub fn attach(sock: &PacketSocket, g: RingGeometry) -> io::Result<RxRing> {
        Ok(RxRing {
            ring: Ring::new(sock.raw(), PACKET_RX_RING, "PACKET_RX_RING", g)?,
        })
    }

    /// The bytes of the ring (all its blocks).
    pub fn bytes(&self) -> u32 {
        self.ring.map_len as u32
    }

    /// The largest frame a slot holds whole (a received frame starts 66 bytes into its slot; an
    /// outer VLAN tag the kernel took out is not in it).
    pub fn max_frame(&self) -> usize {
        self.ring.frame_size.saturating_sub(66)
    }

    /// Replace this ring of `sock` with one of shape `g` (after an MTU change): unmapped and freed
    /// first, as the kernel changes a ring only while no one maps it. What the old ring held is
    /// lost. On an error `sock` is left without a ring (it receives with `recvmmsg`).
    pub fn reshape(self, sock: &PacketSocket, g: RingGeometry) -> io::Result<RxRing> {
        drop(self);
        let none = [0u32; 4];
        setsockopt(
            sock.raw(),
            libc::SOL_PACKET,
            PACKET_RX_RING,
            &none,
            "freeing the PACKET_RX_RING",
        )?;
        RxRing::attach(sock, g)
    }

    /// Hand each slot the kernel has filled to `f` in arrival order, at most `max`, each given back
    /// once `f` returns (read it with [`slot_view`]: nothing in it is trusted). Returns how many.
    pub fn take(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        // Acquire: the frame's bytes, written before the status, are visible after it.
        while n < max
            && self
                .ring
                .status()
                .load(std::sync::atomic::Ordering::Acquire)
                & TP_STATUS_USER
                != 0
        {
            f(self.ring.slot());
            self.ring.hand_over(0);
            n += 1;
        }
        n
    }
}

/// A `TPACKET_V2` transmit ring (`PACKET_TX_RING`) on a packet socket of its own, bound to the
/// interface for sending only (protocol 0: it receives nothing). A frame is copied into the next free
/// slot and marked `TP_STATUS_SEND_REQUEST`; one `send` with no data then has the kernel transmit every
/// marked slot, and it frees each (`TP_STATUS_AVAILABLE`) when the driver is done with the frame. Like
/// the receiving socket it sends past the interface's qdisc (`PACKET_QDISC_BYPASS`): tclab's tree has
/// shaped the frames already, and a kernel qdisc behind it would queue them a second time, on its own
/// terms. `PACKET_LOSS` makes the kernel drop a frame it cannot send (too long for the device) rather
/// than stop the ring at it.
pub struct TxRing {
    ring: Ring,
    fd: OwnedFd,
    /// The last `send` stopped early (the device busy): frames wait in the ring for another.
    stalled: bool,
    /// The last `send` found the device down (`ENETDOWN`): the frames wait until it is up.
    down: bool,
}

impl TxRing {
    /// A sending socket on interface `name` with a transmit ring of shape `g`.
    pub fn open(name: &str, g: RingGeometry) -> io::Result<TxRing> {
        // Protocol 0: no frame is delivered to it.
        let (fd, _) = bound_socket(name, 0)?;
        let raw = fd.as_raw_fd();
        let one: libc::c_int = 1;
        setsockopt(
            raw,
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            &one,
            "PACKET_QDISC_BYPASS",
        )?;
        setsockopt(raw, libc::SOL_PACKET, PACKET_LOSS, &one, "PACKET_LOSS")?;
        let ring = Ring::new(raw, PACKET_TX_RING, "PACKET_TX_RING", g)?;
        Ok(TxRing {
            ring,
            fd,
            stalled: false,
            down: false,
        })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The largest frame a slot holds.
    pub fn max_frame(&self) -> usize {
        self.ring.frame_size.saturating_sub(TX_DATA_OFFSET)
    }

    /// The bytes of the ring (all its blocks).
    pub fn bytes(&self) -> u32 {
        self.ring.map_len as u32
    }

    /// Replace the ring with one of shape `g` on the same socket (after an MTU change; no new
    /// socket, so no privilege is needed). The frames marked are sent first; the kernel changes a
    /// ring only once no frame of it is in flight (`EBUSY` until then), which on a veth takes
    /// microseconds: tried for up to 2 ms. An error hands the socket back without a ring.
    pub fn reshape(mut self, g: RingGeometry) -> Result<TxRing, (io::Error, OwnedFd)> {
        let _ = self.kick();
        let TxRing { ring, fd, .. } = self;
        drop(ring);
        let none = [0u32; 4];
        let mut tries = 0;
        loop {
            match setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_TX_RING,
                &none,
                "freeing the PACKET_TX_RING",
            ) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                Err(e) => return Err((e, fd)),
            }
        }
        match Ring::new(fd.as_raw_fd(), PACKET_TX_RING, "PACKET_TX_RING", g) {
            Ok(ring) => Ok(TxRing {
                ring,
                fd,
                stalled: false,
                down: false,
            }),
            Err(e) => Err((e, fd)),
        }
    }

    /// Copy `frame` into the next free slot, marked to be sent (by [`TxRing::kick`]): `Ok(false)` if
    /// no slot is free yet, an error if the frame is larger than a slot holds.
    pub fn push(&mut self, frame: &[u8]) -> io::Result<bool> {
        if frame.len() > self.ring.frame_size.saturating_sub(TX_DATA_OFFSET) {
            return Err(io::Error::other(format!(
                "a {}-byte frame does not fit a {}-byte ring slot",
                frame.len(),
                self.ring.frame_size
            )));
        }
        // Acquire: the kernel is done with the slot's bytes once it says it is free.
        if self
            .ring
            .status()
            .load(std::sync::atomic::Ordering::Acquire)
            != TP_STATUS_AVAILABLE
        {
            return Ok(false);
        }
        let slot = self.ring.slot();
        slot[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        slot[TX_DATA_OFFSET..TX_DATA_OFFSET + frame.len()].copy_from_slice(frame);
        self.ring.hand_over(TP_STATUS_SEND_REQUEST);
        Ok(true)
    }

    /// Have the kernel send every slot marked so far, without waiting. If it stops early (the device
    /// busy: `ENOBUFS`, `EAGAIN`) or sends nothing (the device set down: `ENETDOWN`; the slots stay
    /// marked), the rest waits in the ring: [`TxRing::stalled`] until a kick sends it.
    pub fn kick(&mut self) -> io::Result<()> {
        // SAFETY: send with no buffer: for a socket with a transmit ring it sends the ring's frames.
        let r = unsafe { libc::send(self.raw(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        self.stalled = false;
        self.down = false;
        if r < 0 {
            let e = io::Error::last_os_error();
            self.down = e.raw_os_error() == Some(libc::ENETDOWN);
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
                | Some(libc::ENETDOWN) => {
                    self.stalled = true;
                    Ok(())
                }
                _ => Err(e),
            };
        }
        Ok(())
    }

    /// Unmark the slots marked but not yet sent (their device set down: a driver frees what its
    /// ring holds at `ndo_stop`), and return how many frames and bytes they held. The kernel takes
    /// marked slots in order from a position of its own, and only within a `send`, which stops at
    /// once on a device down: the marked slots are the run just before `head`, and moving `head`
    /// back over it leaves the two positions the same, as the next frames need.
    pub fn discard(&mut self) -> (u64, u64) {
        let (mut n, mut bytes) = (0, 0);
        let frames = self.ring.frames;
        while n < frames as u64 {
            let head = self.ring.head;
            self.ring.head = (head + frames - 1) % frames;
            // Acquire: a slot the kernel has taken is not read as ours.
            let st = self.ring.status();
            if st.load(std::sync::atomic::Ordering::Acquire) != TP_STATUS_SEND_REQUEST {
                self.ring.head = head;
                break;
            }
            bytes += u64::from(ne_u32(self.ring.slot(), 4).unwrap_or(0));
            self.ring
                .status()
                .store(TP_STATUS_AVAILABLE, std::sync::atomic::Ordering::Release);
            n += 1;
        }
        self.stalled = false;
        self.down = false;
        (n, bytes)
    }

    /// Whether frames wait in the ring for another [`TxRing::kick`].
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// Whether the last [`TxRing::kick`] found the device down.
    pub fn device_down(&self) -> bool {
        self.down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pinned to one of its allowed CPUs is allowed that one alone, read back as the
    /// kernel keeps it (in a thread of its own: the pinning stays with the thread).
    #[test]
    fn a_pinned_thread_is_allowed_its_cpu_alone() {
        let all = allowed_cpus(0).unwrap();
        assert!(!all.is_empty());
        assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        let last = *all.last().unwrap();
        let after = std::thread::spawn(move || {
            pin_to_cpu(0, last).unwrap();
            allowed_cpus(0).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(after, vec![last]);
    }

    /// This thread's capabilities without `cap` (both effective and permitted: for good, in this
    /// thread only, as capset(2) acts on the calling thread).
    fn drop_from_this_thread(cap: u32) {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        let header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        // Two words of effective, permitted, inheritable.
        let mut data = [[0u32; 3]; 2];
        // SAFETY: capget writes two data words we own, after a version-3 header.
        let r = unsafe { libc::syscall(libc::SYS_capget, &header, data.as_mut_ptr()) };
        assert_eq!(r, 0, "capget: {}", io::Error::last_os_error());
        for word in &mut data[(cap / 32) as usize][..2] {
            *word &= !(1 << (cap % 32));
        }
        // SAFETY: capset reads the header and the two words we own.
        let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
        assert_eq!(r, 0, "capset: {}", io::Error::last_os_error());
    }

    /// The test's namespace `PREFIX-PID` with its veths, or `None` with the reason printed where
    /// namespaces cannot be made (not root).
    fn netns(prefix: &str) -> Option<crate::vethns::VethNs> {
        if let Err(e) = crate::lab::Lab::check_root() {
            eprintln!("skipped: {e}");
            return None;
        }
        Some(crate::vethns::VethNs::new(prefix).expect("the test's namespace"))
    }

    /// Without CAP_NET_ADMIN the offloads that are on cannot be turned off. They used to be skipped
    /// as if the device could not change them, and `tclab live` (run with CAP_NET_RAW alone: `capsh
    /// --drop=cap_net_admin`) said "no segmentation, GRO or checksum offload on" while TSO, GSO and
    /// tx-checksumming were on.
    #[test]
    fn offloads_that_this_process_may_not_turn_off_are_an_error_not_skipped() {
        let Some(ns) = netns("rv-offl") else { return };
        // VethNs turns every offload off; a0's are put back as a veth has them.
        ns.enter(|| offloads_on("a0", &["tso", "gso", "tx-checksum"]))
            .unwrap()
            .unwrap();
        let on = ns.enter(|| offloads_on_now("a0")).unwrap().unwrap();
        assert_eq!(on, ["tso", "gso", "tx-checksum"], "a veth's offloads");
        let without = std::thread::spawn(move || {
            ns.enter(|| {
                drop_from_this_thread(12); // CAP_NET_ADMIN
                (offloads_off("a0"), offloads_on_now("a0").unwrap())
            })
            .unwrap()
        })
        .join()
        .unwrap();
        let (r, still) = without;
        let e = r.expect_err("offloads that stayed on were reported turned off or absent");
        let msg = e.to_string();
        assert!(
            msg.starts_with("a0: tso is on and cannot be turned off")
                && msg.contains("CAP_NET_ADMIN"),
            "{msg}"
        );
        assert_eq!(still, ["tso", "gso", "tx-checksum"], "nothing changed");
    }

    /// The kernel's bridge takes Ethernet devices only (`br_add_if`: EINVAL for loopback or another
    /// link type). `tclab live --dev X --dev lo` used to bridge, and sent every frame from X back to
    /// it through lo; a tun (raw IP, no link header) would have had its packets read as frames.
    #[test]
    fn loopback_and_devices_without_an_ethernet_header_are_not_bridged() {
        let Some(ns) = netns("rv-eth") else { return };
        ns.ip(&["tuntap", "add", "dev", "t0", "mode", "tun"])
            .unwrap();
        for d in ["lo", "t0"] {
            ns.ip(&["link", "set", "dev", d, "up"]).unwrap();
        }
        let said = |d: &str| ns.enter(|| check_bridgeable(d)).unwrap();
        assert_eq!(said("a0"), Ok(()), "a veth is Ethernet");
        let lo = said("lo").expect_err("lo was taken as a port");
        assert!(lo.contains("lo is a loopback device"), "{lo}");
        let tun = said("t0").expect_err("a tun was taken as a port");
        assert!(
            tun.contains("t0 is not an Ethernet device (link type 65534"),
            "{tun}"
        );
    }
}
