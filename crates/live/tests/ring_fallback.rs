//! The rings' fallback when the kernel makes a ring that this process then cannot map (an address
//! space limit, `RLIMIT_AS`: `prlimit --as=30000000 tclab live …` shows it): the ring must be taken
//! off the socket again, or the kernel keeps filling it and `recvmmsg`, the fallback the start
//! announces, never sees a frame — a bridge that says it works and forwards nothing. A test binary of
//! its own: the limit holds for the whole process, so no other test may allocate while it is set.

use tclab_core::Engine;
use tclab_live::bridge::{open_ports, Bridge, Rings};
use tclab_live::sys::{self, PacketSocket};
use tclab_live::vethns::VethNs;

/// This process's address space now, in bytes (`VmSize`).
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmSize");
    kb * 1024
}

fn set_as_limit(limit: libc::rlimit) {
    // SAFETY: setrlimit reads the rlimit we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

/// Says once, on the terminal, why this file's tests pass as skipped: libtest captures what a passing
/// test prints with eprintln!, and the README promises a line.
fn skip(why: impl std::fmt::Display) {
    use std::io::Write;
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| drop(writeln!(std::io::stderr(), "ring_fallback: SKIPPED: {why}")));
}

#[test]
fn a_receive_ring_that_cannot_be_mapped_is_taken_off_and_recvmmsg_receives() {
    if let Err(e) = tclab_live::lab::Lab::check_root() {
        skip(e);
        return;
    }
    let ns = VethNs::new("ring-nomap").expect("the test's namespace");
    let (tx, rx) = ns
        .enter(|| {
            (
                PacketSocket::open("b1").unwrap(),
                PacketSocket::open("b0").unwrap(),
            )
        })
        .expect("setns");
    // Room for a few MiB more, not for an 8 MiB receive ring: the kernel makes each ring, the
    // mmap of each receive ring fails.
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the rlimit we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut old) }, 0);
    let room = vm_size() + (6 << 20);
    set_as_limit(libc::rlimit {
        rlim_cur: room,
        rlim_max: old.rlim_max,
    });
    let opened = ns.enter(|| open_ports(&["a0".into(), "a1".into()], 1, Rings::On));
    set_as_limit(old);
    let (mut ports, setup) = opened.expect("setns").expect("ports");
    for r in &setup.rings {
        let why = r.rx.clone().expect_err("no receive ring");
        assert!(why.contains("mmap"), "{}: {why}", r.dev);
    }
    let frame = |k: u8| {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5];
        f.extend(std::iter::repeat_n(k, 100));
        f
    };
    let frames: Vec<Vec<u8>> = (0..5).map(frame).collect();
    for f in &frames {
        assert_eq!(tx.send_batch(std::slice::from_ref(f)).expect("send"), 1);
    }
    let mut b = Bridge::on_ports(Engine::new(), ports.remove(0));
    b.run(Some(300_000_000)).expect("bridge");
    let st = b.stats();
    assert_eq!(
        (st[1].1.rx_packets, st[1].1.rx_ring),
        (5, 0),
        "all five received by recvmmsg on a1"
    );
    let mut bufs = vec![vec![0u8; 2048]; sys::BATCH];
    let mut lens = vec![0; sys::BATCH];
    let mut tags = vec![None; sys::BATCH];
    let n = rx
        .recv_batch(&mut bufs, &mut lens, &mut tags)
        .expect("recv");
    let got: Vec<Vec<u8>> = (0..n)
        .map(|k| bufs[k][..lens[k]].to_vec())
        .filter(|f| f[6..12] == [2, 0, 0, 0, 0, 2])
        .collect();
    assert_eq!(got, frames, "forwarded out of a0 to b0");
}
