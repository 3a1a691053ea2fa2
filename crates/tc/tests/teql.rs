//! teql0 through tc lines: a slave's FIFO of txqueuelen packets (`sch_teql.c`'s `teql_enqueue`), shown
//! with no options, and tc's answer to an option it cannot parse (`parse_noqopt`).

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn a_slave_queues_up_to_its_txqueuelen() {
    let mut e = Engine::new();
    assert_eq!(
        run(&mut e, "qdisc add dev eth0 root handle 1: teql0").code,
        0
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for _ in 0..1001 {
        let _ = dev.enqueue(Packet::of_len(100), &mut cx);
    }
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(
        s.contains("qdisc teql0 1: root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 100000b 1000p"),
        "{s}"
    );
    let o = run(
        &mut e,
        "qdisc replace dev eth0 root handle 1: teql0 limit 5",
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "Unknown qdisc \"teql0\", hence option \"limit\" is unparsable\n"
        )
    );
}
