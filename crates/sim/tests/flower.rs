//! flower in the simulator: a port range sends exactly its ports' traffic to a class, checked by the
//! classes' rates. Figures derived by hand from HTB's rates and the frame overhead.

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
