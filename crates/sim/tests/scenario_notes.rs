//! What a scenario tells its user without stopping (`Scenario::warnings`, which `tclab sim` prints on
//! stderr): a rate in tc's bytes-per-second units is noted once with what it was taken as, and a policy
//! script's refused command is reported once, with its line, its command and the reason.

use tclab_sim::report::{csv_files, summary_json, tc_text};
use tclab_sim::run::run;
use tclab_sim::scenario::{byte_rate_note, load, Scenario};

fn load_ok(text: &str) -> Scenario {
    match load("lab.toml", text, std::path::Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// a --(LINK)-- b with a UDP stream at UDP and a netem line NETEM.
fn lab(link: &str, udp: &str, netem: &str) -> String {
    format!(
        r#"duration = "2s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a"
b = "b"
rate = "{link}"
{netem}
[[traffic]]
kind = "udp"
from = "a"
to = "b"
rate = "{udp}"
"#
    )
}

/// [`lab`] with NODE's tc policy TC.
fn lab_with_policy(link: &str, udp: &str, node: &str, tc: &str) -> String {
    lab(link, udp, "").replace(
        "[[traffic]]",
        &format!("[[policy]]\nnode = \"{node}\"\ntc = \"\"\"\n{tc}\"\"\"\n[[traffic]]"),
    )
}

/// tc's get_rate: `bps`, `kbps`, `mbps`, `gbps`, `tbps` (and `kibps`…) are bytes per second, in any
/// case; `bit`, `kbit`, `mbit` and a bare number are bits.
#[test]
fn byte_units_are_named_with_what_they_mean() {
    assert_eq!(
        byte_rate_note("10mbps").as_deref(),
        Some("is 10 megabytes per second in tc's units (80 Mbit/s); write \"10mbit\" for 10 megabits")
    );
    assert_eq!(
        byte_rate_note("1.5KBps").as_deref(),
        Some("is 1.5 kilobytes per second in tc's units (12 kbit/s); write \"1.5kbit\" for 1.5 kilobits")
    );
    assert_eq!(
        byte_rate_note("100bps").as_deref(),
        Some("is 100 bytes per second in tc's units (800 bit/s); write \"100bit\" for 100 bits")
    );
    assert_eq!(
        byte_rate_note("1GBPS").as_deref(),
        Some("is 1 gigabytes per second in tc's units (8 Gbit/s); write \"1gbit\" for 1 gigabits")
    );
    // 2 × 1024 × 1024 bytes × 8 = 16 777 216 bit/s.
    assert_eq!(
        byte_rate_note("2mibps").as_deref(),
        Some("is 2 mebibytes per second in tc's units (16.777 Mbit/s); write \"2mibit\" for 2 mebibits")
    );
    for bits in ["10mbit", "10Mbit", "1000", "5kibit", "nonsense", "10xbps"] {
        assert_eq!(byte_rate_note(bits), None, "{bits}");
    }
}

#[test]
fn a_rate_in_bytes_is_noted_once_and_taken_as_tc_takes_it() {
    let bytes = load_ok(&lab(
        "10mbps",
        "125kbps",
        "netem = \"delay 5ms rate 1MBps\"",
    ));
    assert_eq!(
        bytes.warnings,
        [
            "note: lab.toml:9: link.rate = \"10mbps\" is 10 megabytes per second in tc's units (80 Mbit/s); write \"10mbit\" for 10 megabits",
            // One note for the line, though it serves both directions.
            "note: lab.toml:10: link.netem = \"delay 5ms rate 1MBps\": 1MBps is 1 megabytes per second in tc's units (8 Mbit/s); write \"1mbit\" for 1 megabits",
            "note: lab.toml:15: traffic.rate = \"125kbps\" is 125 kilobytes per second in tc's units (1 Mbit/s); write \"125kbit\" for 125 kilobits",
        ]
    );
    assert_eq!(bytes.net.ifaces[0].link.rate_bps, 80_000_000);
    let bits = load_ok(&lab("80mbit", "1mbit", "netem = \"delay 5ms rate 8mbit\""));
    assert!(bits.warnings.is_empty(), "{:?}", bits.warnings);
    // The note is all that differs: the same rates in bits give the same output files, byte for byte.
    let files = |mut sc: Scenario| {
        let out = run(&mut sc, &mut |_| {}).expect("the run completes");
        let mut f = vec![
            (
                "summary.json".to_string(),
                summary_json(&sc, &out).to_string(),
            ),
            ("tc.txt".to_string(), tc_text(&out)),
        ];
        f.extend(
            csv_files(&sc, &out)
                .into_iter()
                .map(|(n, t)| (n.to_string(), t)),
        );
        f
    };
    let (a, b) = (files(bytes), files(bits));
    assert!(a
        .iter()
        .any(|(n, t)| n == "flows.csv" && t.lines().count() > 2));
    assert_eq!(a, b);
}

/// Seed 003's example: the article's `-dport 22` typo is refused by iptables, in the script and in
/// tclab. The user is told once — the script's line, the command, iptables' reason, what it means for
/// the run — not once from the report and again from the script's stderr, and not with the script's
/// clean-up of a qdisc that is not there yet (which the run never needed) or iptables' `Try` line.
#[test]
fn seed003s_refused_line_is_reported_once_with_its_cause() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed003");
    let path = dir.join("gateway.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let sc = match load("gateway.toml", &text, &dir) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let all = sc.warnings.join("\n");
    eprintln!("{all}");
    assert_eq!(all.matches("Bad argument `22'").count(), 1, "{all}");
    assert_eq!(all.matches("-dport 22").count(), 1, "{all}");
    assert!(
        all.contains(
            "gateway.toml:49: policy.script: gateway.sh: 1 command was refused and is not part of the run (24 applied):\n  gateway.sh:64: iptables -t mangle -A POSTROUTING \
             -o eth0 -p tcp --tcp-flags SYN SYN -dport 22 -j CONNMARK --set-mark 300\n    Bad argument `22'"
        ),
        "{all}"
    );
    assert!(!all.contains("Try `iptables -h'"), "{all}");
    assert!(!all.contains("Cannot find device"), "{all}");
    // tc's warnings for classes it created are kept, each once, at its line.
    for (line, class) in [(26, "10100"), (49, "10300"), (81, "10999")] {
        let w = format!("gateway.sh:{line}: Warning: sch_htb: quantum of class {class} is small.");
        assert_eq!(all.matches(&w).count(), 1, "{w}: {all}");
    }
    assert_eq!(all.matches("quantum of class").count(), 3, "{all}");
    assert!(!all.contains("printed on stderr"), "{all}");
}

/// What a script prints on stderr itself stays, beside (not mixed with) tc's messages, and a failure
/// the script silenced with 2>/dev/null is reported all the same.
#[test]
fn a_scripts_own_stderr_is_kept_and_tcs_shown_once() {
    let dir = std::env::temp_dir().join(format!("tclab-notes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.sh"),
        "echo 'starting up' >&2\n\
         tc qdisc add dev eth0 root handle 1: htb default 20\n\
         tc class add dev eth0 parent 1: classid 1:20 htb rate 1mbit ceil 1bogus\n\
         tc class add dev eth0 parent 1: classid 1:30 htb rate 1mbit ceil 1bogus 2>/dev/null\n\
         echo 'ceil: see above' >&2\n",
    )
    .unwrap();
    let text = lab("10mbit", "1mbit", "") + "[[policy]]\nnode = \"a\"\nscript = \"p.sh\"\n";
    let sc = match load("lab.toml", &text, &dir) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        sc.warnings,
        [
            "lab.toml:18: policy.script: p.sh: 2 commands were refused and are not part of the run (1 applied):\n  \
             p.sh:3: tc class add dev eth0 parent 1: classid 1:20 htb rate 1mbit ceil 1bogus\n    Illegal \"ceil\"\n  \
             p.sh:4: tc class add dev eth0 parent 1: classid 1:30 htb rate 1mbit ceil 1bogus\n    Illegal \"ceil\"",
            // The script's own lines; tc's message, which it let through, is in the report alone.
            "lab.toml:18: policy.script: p.sh printed on stderr:\n  starting up\n  ceil: see above",
        ]
    );
}

/// A u32 filter on an address no node has (an ISP's per-subscriber `match ip dst 100.64.0.2/32`)
/// never matches: a node's addresses are its links' ends, 10.0.L.1 and 10.0.L.2. The scenario says
/// so once per device, naming the first such filter; the filter on b's own address (10.0.1.2, in
/// 10.0.1.0/24) goes unmentioned. Seen: the UDP stream to b takes 1:20 (6 Mbit/s), not 1:10 (2).
#[test]
fn u32_filters_on_addresses_no_node_has_are_noted() {
    let text = lab_with_policy(
        "100mbit",
        "10mbit",
        "a",
        "qdisc add dev eth0 root handle 1: htb default 30
class add dev eth0 parent 1: classid 1:10 htb rate 2mbit
class add dev eth0 parent 1: classid 1:20 htb rate 6mbit
class add dev eth0 parent 1: classid 1:30 htb rate 1mbit
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 100.64.0.2/32 flowid 1:10
filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.0.1.0/24 flowid 1:20
",
    );
    let mut sc = load_ok(&text);
    let notes: Vec<&String> = sc.warnings.iter().filter(|w| w.contains("u32")).collect();
    assert_eq!(
        notes,
        ["note: lab.toml: node a eth0: 1 u32 filter matches IPv4 addresses no node of the scenario \
          has (fh 800:0:800 dst 100.64.0.2/32): it never matches here, and its packets go where \
          unclassified ones go; a node's addresses are its links' ends, 10.0.L.1 and 10.0.L.2 \
          (docs/SCENARIOS.md)"],
    );
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    let g = out.flows[0].goodput_bps;
    assert!(
        g > 5e6 && g < 6e6,
        "{g}: 1:20's 6 Mbit/s of frames, not 1:10's 2"
    );
}

/// A flower filter on Ethernet addresses or an input device never matches a simulated packet (it
/// comes in no frame and carries no input device: crates/core's flower.rs), so the scenario says so,
/// once per filter, naming the node, device and filter; the policy's other filters go unmentioned.
/// Seen: the ingress policer below, keyed on dst_mac, lets a 5 Mbit/s UDP stream through whole.
#[test]
fn flower_keys_a_simulated_packet_lacks_are_noted() {
    let text = lab_with_policy(
        "10mbit",
        "5mbit",
        "b",
        "qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol ip prio 1 flower dst_mac 02:00:00:00:00:01 action police rate 2mbit burst 20k drop
filter add dev eth0 parent ffff: protocol ip prio 2 flower indev eth0 ip_proto tcp action drop
filter add dev eth0 parent ffff: protocol ip prio 3 flower ip_proto udp action pass
",
    );
    let mut sc = load_ok(&text);
    let notes: Vec<&String> = sc
        .warnings
        .iter()
        .filter(|w| w.contains("flower"))
        .collect();
    assert_eq!(
        notes,
        [
            "note: lab.toml: node b eth0: flower filter pref 1 handle 0x1 matches Ethernet addresses (dst_mac/src_mac), which a simulated packet does not carry: it never matches here (docs/checks/flower-mac-simulated.md)",
            "note: lab.toml: node b eth0: flower filter pref 2 handle 0x1 matches an input device (indev), which a simulated packet does not carry: it never matches here (docs/checks/flower-mac-simulated.md)",
        ],
    );
    // What the note says: the policer never sees the stream, which arrives whole (5 Mbit/s, not 2).
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    assert!(
        out.flows[0].goodput_bps > 4.9e6,
        "{}",
        out.flows[0].goodput_bps
    );
}
