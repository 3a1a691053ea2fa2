//! The cgroup and route classifiers in the simulator, against figures derived by hand: applications on
//! one host told apart by their `net_cls` classid alone (`cls_cgroup.c`: `task_get_classid`), and
//! forwarded traffic by the realm of the route back to its source (`cls_route.c`, the source realm
//! `fib_validate_source` gives a forwarded packet's route), or a host's own by its route's realm.
//!
//! Every figure is the HTB class's rate in goodput: a 1448-byte UDP payload travels in a 1476-byte IP
//! packet, which HTB charges as a 1490-byte frame (14 bytes of Ethernet header), so a class of R bit/s
//! delivers R × 1448 / 1490 bit/s of payload. Each sender offers 10 Mbit/s, more than any class, so
//! every class stays backlogged; a class's burst (a few kilobytes) is under 1 % of 10 s at its rate.

use tclab_sim::run::{run, FlowResult, Outcome};
use tclab_sim::scenario::{load, Scenario};

fn scenario(text: &str) -> Result<Scenario, String> {
    load("test.toml", text, std::path::Path::new(".")).map_err(|e| e.to_string())
}

fn go(text: &str) -> Outcome {
    let mut sc = scenario(text).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

fn flow<'a>(out: &'a Outcome, name: &str) -> &'a FlowResult {
    out.flows.iter().find(|f| f.name == name).expect(name)
}

/// Payload goodput of a backlogged HTB class of `rate` bit/s carrying 1448-byte UDP datagrams.
fn class_goodput(rate: f64) -> f64 {
    rate * 1448.0 / 1490.0
}

fn assert_within(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= want * tolerance,
        "{what}: {got:.0} bit/s, expected {want:.0} ± {:.0} %",
        tolerance * 100.0
    );
}

/// HTB with three leaves: 1:10 at 2 Mbit/s, 1:20 at 6 Mbit/s, the default 1:30 at 100 kbit/s.
fn htb(dev: &str) -> String {
    format!(
        "qdisc add dev {dev} root handle 1: htb default 30\n\
         class add dev {dev} parent 1: classid 1:1 htb rate 10mbit\n\
         class add dev {dev} parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit\n\
         class add dev {dev} parent 1:1 classid 1:20 htb rate 6mbit ceil 6mbit\n\
         class add dev {dev} parent 1:1 classid 1:30 htb rate 100kbit ceil 100kbit\n"
    )
}

fn udp(name: &str, from: &str, to: &str, extra: &str) -> String {
    format!(
        "[[traffic]]\nkind = \"udp\"\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"{to}\"\n\
         rate = \"10mbit\"\nport = 5201\n{extra}"
    )
}

/// Host a, three applications sending to the same port of b: two in net_cls cgroups, one in none.
fn apps_on_one_host() -> String {
    format!(
        r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "100mbit"
delay = "1ms"
[[policy]]
node = "a"
tc = """
{}filter add dev eth0 parent 1: protocol ip prio 10 handle 1: cgroup
"""
[[cgroup]]
node = "a"
path = "/sys/fs/cgroup/net_cls/video"
classid = "1:10"
[[cgroup]]
node = "a"
path = "/sys/fs/cgroup/net_cls/backup"
classid = "0x10020"
{}{}{}"#,
        htb("eth0"),
        udp(
            "video",
            "a",
            "b",
            "cgroup = \"/sys/fs/cgroup/net_cls/video\"\n"
        ),
        udp(
            "backup",
            "a",
            "b",
            "cgroup = \"/sys/fs/cgroup/net_cls/backup\"\n"
        ),
        udp("other", "a", "b", ""),
    )
}

#[test]
fn applications_go_to_their_cgroups_classes() {
    // Same host, same addresses, same destination port: only the classid tells the flows apart. The
    // cgroup filter's result is the classid itself (1:10; 0x10020 is 1:20, major in the high 16 bits); the application in no
    // cgroup has classid 0, no match, and HTB's default class.
    let out = go(&apps_on_one_host());
    assert_within(
        flow(&out, "video").goodput_bps,
        class_goodput(2e6),
        0.01,
        "video in 1:10",
    );
    assert_within(
        flow(&out, "backup").goodput_bps,
        class_goodput(6e6),
        0.01,
        "backup in 1:20",
    );
    // 100 kbit/s is 84 frames in 10 s: a frame more or less of burst is 1.2 %.
    assert_within(
        flow(&out, "other").goodput_bps,
        class_goodput(1e5),
        0.03,
        "other in the default 1:30",
    );
}

#[test]
fn a_cgroup_is_the_sending_nodes() {
    let text = apps_on_one_host().replace(
        "path = \"/sys/fs/cgroup/net_cls/video\"\nclassid",
        "path = \"/v\"\nclassid",
    );
    let e = scenario(&text).err().expect("refused");
    assert!(
        e.contains(
            "traffic.cgroup: no [[cgroup]] with path \"/sys/fs/cgroup/net_cls/video\" on node a"
        ),
        "{e}"
    );
    let e = scenario(&apps_on_one_host().replace("\"0x10020\"", "\"1:2:3\""))
        .err()
        .expect("refused");
    assert!(e.contains("cgroup.classid"), "{e}");
}

#[test]
fn a_cgroup_filter_nothing_feeds_is_noted() {
    // No entry runs in a cgroup: the filter can never match, and the run says so.
    let text = apps_on_one_host()
        .replace("cgroup = \"/sys/fs/cgroup/net_cls/video\"\n", "")
        .replace("cgroup = \"/sys/fs/cgroup/net_cls/backup\"\n", "");
    let sc = scenario(&text).unwrap();
    assert!(
        sc.warnings
            .iter()
            .any(|w| w.contains("node a eth0: cgroup filter pref 10")),
        "{:?}",
        sc.warnings
    );
    assert!(scenario(&apps_on_one_host()).unwrap().warnings.is_empty());
}

/// a1 and a2 each on their own link to router r, r to b; r shapes its link to b with HTB and route
/// filters on the source realm. `realms` are r's policy lines for the routes back to a1 and a2.
fn router(realms: &str) -> String {
    format!(
        r#"
duration = "10s"
[[node]]
name = "a1"
[[node]]
name = "a2"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a1:eth0"
b = "r:eth0"
rate = "100mbit"
[[link]]
a = "a2:eth0"
b = "r:eth1"
rate = "100mbit"
[[link]]
a = "r:eth2"
b = "b:eth0"
rate = "100mbit"
[[policy]]
node = "r"
tc = """
{realms}{}filter add dev eth2 parent 1: protocol ip prio 1 route from 1 classid 1:10
filter add dev eth2 parent 1: protocol ip prio 2 route from 2 classid 1:20
"""
{}{}"#,
        htb("eth2"),
        udp("one", "a1", "b", ""),
        udp("two", "a2", "b", ""),
    )
}

const REALMS: &str = "ip route change 10.0.1.0/24 dev eth0 realm 1\n\
                      ip route replace 10.0.2.0/24 dev eth1 realm 2\n";

#[test]
fn forwarded_packets_carry_the_realm_of_the_route_to_their_source() {
    // a1's packets reach b through r with r's route back to 10.0.1.1 in realm 1: source realm 1,
    // `route from 1`, class 1:10. a2's, realm 2, class 1:20.
    let out = go(&router(REALMS));
    assert_within(
        flow(&out, "one").goodput_bps,
        class_goodput(2e6),
        0.01,
        "a1 in 1:10",
    );
    assert_within(
        flow(&out, "two").goodput_bps,
        class_goodput(6e6),
        0.01,
        "a2 in 1:20",
    );
    // Without the realms, neither filter matches: both flows share the default 100 kbit/s class.
    let out = go(&router(""));
    let both = flow(&out, "one").goodput_bps + flow(&out, "two").goodput_bps;
    assert_within(both, class_goodput(1e5), 0.03, "both in the default 1:30");
}

#[test]
fn a_hosts_own_packets_carry_their_routes_realm() {
    // On a1 itself: its route to b's link in realm 7 (`to 7`), a `meta(rt_classid)` ematch reading the
    // same realm, and the route to a2's link in none. An output route has no source realm.
    let policy = format!(
        "tc = \"\"\"\nip route add 10.0.2.0/24 via 10.0.1.2 realm 7\n\
         ip route add 10.0.3.0/24 via 10.0.1.2 realm 0x10008\n\
         {}filter add dev eth0 parent 1: protocol ip prio 1 route to 7 classid 1:10\n\
         filter add dev eth0 parent 1: protocol ip prio 2 basic match meta(rt_classid eq 0x10008) classid 1:20\n\
         \"\"\"",
        htb("eth0")
    );
    let out = realms_of_a("meta", &policy, None);
    to_b_and_c_in_their_classes(&out);
}

/// a - r - b and r - c, 100 Mbit/s each (b's link 10.0.2.0/24, c's 10.0.3.0/24), a UDP flow from a
/// to each, and `policy` on a (what follows `[[policy]]`'s `node = "a"`; `script` written beside
/// the scenario as a.sh).
fn realms_of_a(tag: &str, policy: &str, script: Option<&str>) -> Outcome {
    let text = format!(
        r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "r"
[[node]]
name = "b"
[[node]]
name = "c"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "100mbit"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "100mbit"
[[link]]
a = "r:eth2"
b = "c:eth0"
rate = "100mbit"
[[policy]]
node = "a"
{policy}
{}{}"#,
        udp("to-b", "a", "b", ""),
        udp("to-c", "a", "c", ""),
    );
    let dir = std::env::temp_dir().join(format!("tclab-realms-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(s) = script {
        std::fs::write(dir.join("a.sh"), s).unwrap();
    }
    let sc = load("test.toml", &text, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let mut sc = sc.unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

/// a's flows to b in 1:10 (2 Mbit/s) and to c in 1:20 (6 Mbit/s), within 1 %.
fn to_b_and_c_in_their_classes(out: &Outcome) {
    let b = flow(out, "to-b").goodput_bps;
    assert_within(b, class_goodput(2e6), 0.01, "to b in 1:10");
    let c = flow(out, "to-c").goodput_bps;
    assert_within(c, class_goodput(6e6), 0.01, "to c in 1:20");
}

fn route_filters() -> String {
    htb("eth0")
        + "filter add dev eth0 parent 1: protocol ip prio 1 route to 7 classid 1:10\n\
           filter add dev eth0 parent 1: protocol ip prio 2 route to 8 classid 1:20\n"
}

#[test]
fn a_scripts_ip_route_lines_give_the_simulated_routes_their_realms() {
    // The same as a tc policy's lines, through `tclab script run`'s journal (`route` records): b's
    // link in realm 7, so to-b takes 1:10 (2 Mbit/s); `ip -4 route` is the same command, c's link in
    // realm 8, so to-c takes 1:20 (6 Mbit/s). Each figure is HTB's rate × 1448/1490.
    let script = format!(
        "ip route add 10.0.2.0/24 via 10.0.1.2 realm 7\n\
         ip -4 route add 10.0.3.0/24 via 10.0.1.2 realm 8\n\
         ip route add default via 10.0.1.2\n{}",
        route_filters()
            .lines()
            .map(|l| format!("tc {l}\n"))
            .collect::<String>()
    );
    let out = realms_of_a("script", "script = \"a.sh\"", Some(&script));
    to_b_and_c_in_their_classes(&out);
    // Without the route lines, both go to the default 100 kbit/s class (the script's own realms are
    // all that gave the packets theirs).
    let bare: String = script
        .lines()
        .filter(|l| !l.starts_with("ip"))
        .map(|l| format!("{l}\n"))
        .collect();
    let out = realms_of_a("bare", "script = \"a.sh\"", Some(&bare));
    let both = flow(&out, "to-b").goodput_bps + flow(&out, "to-c").goodput_bps;
    assert_within(both, class_goodput(1e5), 0.03, "both in the default 1:30");
}

#[test]
fn ip_dash_4_route_in_a_tc_policy_is_a_route_line() {
    // `ip -4 route …` was read as a tc command (and refused); it is `ip route …` for IPv4.
    let policy = format!(
        "tc = \"\"\"\nip -4 route add 10.0.2.0/24 via 10.0.1.2 realm 7\n\
         ip -f inet route add 10.0.3.0/24 via 10.0.1.2 realm 8\n{}\"\"\"",
        route_filters()
    );
    let out = realms_of_a("dash4", &policy, None);
    to_b_and_c_in_their_classes(&out);
}

#[test]
fn a_scripts_route_line_the_simulated_paths_refuse_is_the_policys_error() {
    // The store accepts any gateway (it has no addresses); the simulator, which has, refuses one that
    // is no neighbour of a's, as the kernel does.
    let script = "ip route add 10.0.2.0/24 via 10.0.9.9 realm 7\n";
    let text = "duration = \"1s\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n\
         [[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nrate = \"10mbit\"\n\
         [[policy]]\nnode = \"a\"\nscript = \"a.sh\"\n";
    let dir = std::env::temp_dir().join(format!("tclab-realms-gw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.sh"), script).unwrap();
    let e = load("test.toml", text, &dir)
        .err()
        .expect("refused")
        .to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(e.contains("Nexthop has invalid gateway"), "{e}");
}

#[test]
fn route_lines_are_checked_as_ip_and_against_the_simulated_paths() {
    let refused = |line: &str, words: &str| {
        let e = scenario(&router(&format!("{line}\n"))).err().expect(line);
        assert!(e.contains(words), "{line}: {e}");
    };
    // A connected subnet's route exists: `add` fails as on Linux; `change` is the way.
    refused(
        "ip route add 10.0.1.0/24 dev eth0 realm 1",
        "RTNETLINK answers: File exists",
    );
    refused(
        "ip route change 10.0.1.1/24 dev eth0 realm 1",
        "Invalid prefix for given prefix length",
    );
    refused(
        "ip route change 10.0.1.0/24 dev eth0 realms 2/300",
        "\"realm\" value is invalid",
    );
    refused(
        "ip route change 10.0.1.0/24 dev eth0 realm /4",
        "\"realm\" value is invalid",
    );
    refused(
        "ip route change 10.0.3.0/24 dev eth0 realm 3",
        "does not change a path",
    );
    refused(
        "ip route change 10.0.3.0/24 via 10.0.1.1 realm 3",
        "does not change a path",
    );
    refused(
        "ip route change 10.0.3.0/24 via 10.9.9.9 realm 3",
        "Nexthop has invalid gateway",
    );
    refused(
        "ip route change 10.0.3.0/24 dev eth9 realm 3",
        "Cannot find device \"eth9\"",
    );
    refused("ip route change 10.0.3.0/24 dev eth2", "without a realm");
    refused(
        "ip route change 10.0.3.0/24 dev eth2 metric 5 realm 1",
        "\"metric\" is not modelled",
    );
    // `FROM/TO` and a raw 32-bit realm, as ip reads them.
    scenario(&router("ip route change 10.0.3.0/24 dev eth2 realms 3/\n")).unwrap();
    scenario(&router("ip route add 10.0.3.2 dev eth2 realm 70000\n")).unwrap();
}
