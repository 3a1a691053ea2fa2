//! GRED behind an ingress filter, configured by `tc` lines as a user writes them: the filter's `classid`
//! minor becomes the packet's `tc_index` (the kernel's `tc_run`), and GRED on the way out reads its low
//! four bits as the drop precedence. The counts are those of the packets sent, so `tc -s` must show them
//! exactly.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

#[test]
fn an_ingress_classid_picks_the_virtual_queue() {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    for l in [
        "qdisc add dev eth0 root handle 1: gred setup vqs 4 default 0",
        "qdisc change dev eth0 root gred vq 0 limit 100K min 30K max 60K avpkt 1000",
        "qdisc change dev eth0 root gred vq 2 prio 3 limit 100K min 30K max 60K avpkt 1000",
        "qdisc add dev eth0 handle ffff: ingress",
        "filter add dev eth0 parent ffff: protocol ip u32 match ip dport 5001 0xffff classid 1:2",
    ] {
        tc(&mut e, l);
    }
    let dev = e.device_mut("eth0").unwrap();
    // Three packets to port 5001 (DP 2), two to port 80 (no filter: tc_index 0, VQ 0).
    for dport in [5001, 80, 5001, 80, 5001] {
        let mut cx = Cx::new(0);
        let p = Packet::udp4([10, 0, 0, 1], 4000, [10, 0, 0, 2], dport, 0, 1000);
        let p = dev
            .receive(p, &mut cx)
            .expect("the ingress filter lets it through");
        dev.enqueue(p, &mut cx);
    }
    let out = tc(&mut e, "-s qdisc show dev eth0 root");
    // Outside grio every VQ has prio 8, whatever `prio` said; the limit is txqueuelen 1000 × 1514.
    // The averages: tc's burst (2·30720 + 61440)/(3·1000) = 40 gives Wlog 4 (a = 41 − 30.72 = 10.28 is
    // first reached by (1 − (1−W)^40)/W at W = 1/16: 14.6); the average scaled by 16 grows by the
    // backlog found minus itself/16 — VQ 0 finds 0 then 1000 bytes: 1000, shown 1000/16 = 62 bytes;
    // VQ 2 finds 0, 1000, 2000: 1000 + 2000 − 62 = 2938, shown 183.
    assert!(out.starts_with(
        "qdisc gred 1: root refcnt 2 vqs 4 default 0 limit 1514000b \n vq 0 prio 8 limit 100Kb min 30Kb max 60Kb \n  Queue size: average 62b current 2000b \n  Dropped packets: forced 0 early 0 pdrop 0 other 0 \n  Marked packets: forced 0 early 0 \n  Total packets: 2 (2000b) \n vq 2 prio 8 limit 100Kb min 30Kb max 60Kb \n  Queue size: average 183b current 3000b \n  Dropped packets: forced 0 early 0 pdrop 0 other 0 \n  Marked packets: forced 0 early 0 \n  Total packets: 3 (3000b) \n Sent 0 bytes 0 pkt"
    ), "{out}");
}

#[test]
fn tcs_notices_come_first_on_stderr() {
    // q_gred.c prints the defaults it chose while parsing, before the kernel answers: burst (2·10000 +
    // 30000)/(3·1000) = 16, and the 10 Mbit/s bandwidth; with burst 200 the EWMA constant is 1/4096
    // (Wlog 12 ≥ 10), which tc warns about. A failed parse prints its notices before its error.
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    tc(
        &mut e,
        "qdisc add dev eth0 root handle 1: gred setup vqs 4 default 1",
    );
    let run = |e: &mut Engine, line: &str| {
        let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        tclab_tc::run(e, &argv, 0)
    };
    let out = run(
        &mut e,
        "qdisc change dev eth0 root gred vq 1 limit 100000 min 10000 max 30000 avpkt 1000",
    );
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (0, "GRED: set burst to 16\nGRED: set bandwidth to 10Mbit\n")
    );
    let out = run(&mut e, "qdisc change dev eth0 root gred vq 1 limit 100000 min 10000 max 30000 avpkt 1000 burst 200 bandwidth 1mbit");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (0, "GRED: WARNING. Burst 200 seems to be too large.\n")
    );
    let out = run(
        &mut e,
        "qdisc change dev eth0 root gred vq 1 limit 100000 min 40000 max 30000 avpkt 1000",
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with("GRED: set burst to 36\nGRED: set bandwidth to 10Mbit\ntc_red_eval_ewma() burst 36 is too small"), "{}", out.stderr);
}
