//! flower in the simulator: a port range sends exactly its ports' traffic to a class, and `ct_state`
//! tells a router's established TCP from a one-way UDP flow, checked by the classes' rates. Figures
//! derived by hand from HTB's rates and the frame overhead.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

/// a --(100 Mbit/s)-- r --(100 Mbit/s)-- b; on r's way to b an HTB whose class 1:10 (2 Mbit/s) takes
/// what flower's `dst_port 1000-2000` matches and 1:20 (3 Mbit/s) the rest. Neither class can borrow.
const SCENARIO: &str = r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "100mbit"
delay = "1ms"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "100mbit"
delay = "1ms"
[[policy]]
node = "r"
tc = '''
qdisc add dev eth1 root handle 1: htb default 20
class add dev eth1 parent 1: classid 1:10 htb rate 2mbit ceil 2mbit
class add dev eth1 parent 1: classid 1:20 htb rate 3mbit ceil 3mbit
filter add dev eth1 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 1000-2000 classid 1:10
'''
"#;

fn udp(port: u16) -> String {
    format!(
        "[[traffic]]\nkind = \"udp\"\nname = \"p{port}\"\nfrom = \"a\"\nto = \"b\"\nrate = \"4mbit\"\nlength = 1000\nport = {port}\n"
    )
}

fn go(text: &str) -> Outcome {
    let mut sc =
        load("flower.toml", text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

#[test]
fn a_port_range_sends_exactly_its_ports_to_its_class() {
    // Ports 1000 and 2000 are the range's bounds (inclusive), 2001 is just past it. Each sends 4 Mbit/s
    // of 1000-byte datagrams: 1042-byte frames, which HTB counts, so a class at R delivers
    // R × 1000/1042 of payload. 1:10 carries 1000 and 2000 together, 1:20 carries 2001 alone.
    let text = format!("{SCENARIO}{}{}{}", udp(1000), udp(2000), udp(2001));
    let out = go(&text);
    let goodput = |name: &str| {
        out.flows
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("flow {name}"))
            .goodput_bps
    };
    let in_range = goodput("p1000") + goodput("p2000");
    let past = goodput("p2001");
    let share = 1000.0 / 1042.0;
    let near = |got: f64, want: f64| (got - want).abs() / want < 0.01;
    assert!(
        near(in_range, 2e6 * share),
        "ports 1000 and 2000 share 1:10: {in_range:.0} bit/s, expected {:.0}",
        2e6 * share
    );
    assert!(
        goodput("p1000") > 0.3e6 && goodput("p2000") > 0.3e6,
        "both bounds are in the range"
    );
    assert!(
        near(past, 3e6 * share),
        "port 2001 goes to the default 1:20: {past:.0} bit/s, expected {:.0}",
        3e6 * share
    );
}

/// The scenario's network (its links, not its policy) with `policies` and `traffic` after it, run with
/// `script` written beside it as `name` (in a directory of its own, `tag` telling runs apart).
fn with_script(tag: &str, name: &str, script: &str, policies: &str, traffic: &str) -> Outcome {
    let dir = std::env::temp_dir().join(format!("tclab-flower-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), script).unwrap();
    let net = &SCENARIO[..SCENARIO.find("[[policy]]").unwrap()];
    let text = format!("{net}{policies}{traffic}");
    let mut sc = load("flower.toml", &text, &dir).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

/// The same router with a script policy: flower `ct_state +trk+est` sends to 1:10 (2 Mbit/s) what the
/// router's connection tracking calls established, the rest goes to 1:20 (3 Mbit/s). `iptables` adds
/// one mangle rule or none: the router tracks connections only while its netfilter is in use, as the
/// kernel registers conntrack's hooks only for a user.
fn tracked(track: bool) -> Outcome {
    let rule = if track {
        "iptables -t mangle -A FORWARD -j ACCEPT\n"
    } else {
        ""
    };
    let script = format!(
        "tc qdisc add dev eth1 root handle 1: htb default 20\n\
         tc class add dev eth1 parent 1: classid 1:10 htb rate 2mbit ceil 2mbit\n\
         tc class add dev eth1 parent 1: classid 1:20 htb rate 3mbit ceil 3mbit\n\
         tc filter add dev eth1 parent 1: protocol ip prio 1 flower ct_state +trk+est classid 1:10\n\
         {rule}"
    );
    let traffic = format!(
        "{}[[traffic]]\nkind = \"tcp\"\nname = \"bulk\"\nfrom = \"a\"\nto = \"b\"\n",
        udp(1000)
    );
    let policy = "[[policy]]\nnode = \"r\"\nscript = \"ct.sh\"\n";
    with_script(&format!("ct-{track}"), "ct.sh", &script, policy, &traffic)
}

#[test]
fn ct_state_est_takes_a_tcp_transfer_and_never_a_one_way_udp_flow() {
    let goodput = |out: &Outcome, name: &str| {
        out.flows
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("flow {name}"))
            .goodput_bps
    };
    let near = |got: f64, want: f64, tol: f64| (got - want).abs() / want < tol;
    // Tracked: a TCP connection is NEW for its SYN and ESTABLISHED once the SYN-ACK came back, so its
    // data takes 1:10: at most 2 Mbit/s × 1448/1514 of payload (full segments in 1514-byte frames),
    // and a bulk transfer over 10 s keeps it nearly full. The UDP flow is never answered, so it stays
    // NEW (`IPS_SEEN_REPLY` never set) and has 1:20 alone: 3 Mbit/s × 1000/1042.
    let out = tracked(true);
    let tcp_ceiling = 2e6 * 1448.0 / 1514.0;
    let tcp = goodput(&out, "bulk");
    assert!(
        tcp <= tcp_ceiling * 1.01 && tcp > tcp_ceiling * 0.9,
        "TCP in 1:10: {tcp:.0} bit/s, at most {tcp_ceiling:.0}"
    );
    let udp = goodput(&out, "p1000");
    assert!(
        near(udp, 3e6 * 1000.0 / 1042.0, 0.01),
        "UDP alone in 1:20: {udp:.0} bit/s"
    );
    // Untracked: no packet is established, 1:10 stays empty and both flows share 1:20's 3 Mbit/s.
    let out = tracked(false);
    let show = out
        .tc_show
        .iter()
        .find(|(node, dev, _)| node == "r" && dev == "eth1")
        .map(|(_, _, s)| s.as_str())
        .expect("r's eth1 listing");
    assert!(
        show.contains("class htb 1:10 root prio 0 rate 2Mbit ceil 2Mbit burst 1600b cburst 1600b \n Sent 0 bytes 0 pkt"),
        "{show}"
    );
    // Their frames carry 1448/1514 and 1000/1042 of payload: between 95.6 % and 96.0 % of 3 Mbit/s.
    let both = goodput(&out, "bulk") + goodput(&out, "p1000");
    assert!(
        both > 3e6 * 1448.0 / 1514.0 * 0.99 && both < 3e6 * 1000.0 / 1042.0 * 1.01,
        "TCP and UDP share 1:20: {both:.0} bit/s"
    );
}

/// a tracks its own connections (a mangle rule), r's ingress drops what flower calls `ct_state STATE`.
fn ingress_drop(state: &str) -> Outcome {
    let policies = format!(
        "[[policy]]\nnode = \"a\"\nscript = \"a.sh\"\n[[policy]]\nnode = \"r\"\ntc = '''\n\
         qdisc add dev eth0 ingress\n\
         filter add dev eth0 parent ffff: protocol ip prio 1 flower ct_state {state} action drop\n'''\n"
    );
    let script = "iptables -t mangle -A OUTPUT -j ACCEPT\n";
    let tag = format!("ingress{}", state.len());
    with_script(&tag, "a.sh", script, &policies, &udp(1000))
}

#[test]
fn a_frame_arrives_untracked_whatever_its_sender_tracked() {
    // a's conntrack made its datagrams +trk+new on the way out, but that stays on a: at r's ingress,
    // before r's PREROUTING, they carry no connection. `ct_state +trk` drops none of the 4 Mbit/s of
    // payload (the 100 Mbit/s links carry it all); `ct_state -trk` drops them all.
    let goodput = |out: &Outcome| out.flows[0].goodput_bps;
    let kept = goodput(&ingress_drop("+trk"));
    assert!(
        (kept - 4e6).abs() / 4e6 < 0.01,
        "+trk drops nothing: {kept:.0} bit/s"
    );
    assert_eq!(goodput(&ingress_drop("-trk")), 0.0, "-trk drops everything");
}
