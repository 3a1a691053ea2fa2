//! The tunnel_key action through tc lines: `set` attaches the tunnel (addresses, key id, port,
//! options, flags) to a packet as metadata and leaves its bytes alone, `unset` releases it
//! (`act_tunnel_key.c`'s `tunnel_key_act`); the listing as `m_tunnel_key.c` prints it (one field a
//! line, the port only when not 0, Geneve options as CLASS:TYPE:DATA); the kernel's and tc's
//! refusals.

use std::net::{IpAddr, Ipv4Addr};
use tclab_core::action::tunnel_key::TunnelOpts;
use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn set_attaches_the_tunnel_and_unset_releases_it() {
    let mut e = Engine::new();
    assert_eq!(run(&mut e, "qdisc add dev eth0 ingress").code, 0);
    let o = run(
        &mut e,
        "filter add dev eth0 parent ffff: protocol ip prio 1 matchall action tunnel_key set src_ip 10.0.0.1 dst_ip 10.0.0.2 id 7 dst_port 6081 geneve_opts 0102:80:00880022 nocsum",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let sent = Packet::udp4([192, 168, 1, 1], 1, [192, 168, 1, 2], 2, 0, 500);
    let p = e
        .device_mut("eth0")
        .unwrap()
        .receive(sent.clone(), &mut Cx::new(0))
        .expect("passes");
    assert_eq!((&p.data, p.len), (&sent.data, 500), "no byte changed");
    let t = p.tunnel().expect("the tunnel is attached");
    assert_eq!(
        (t.src, t.dst, t.key_id, t.dst_port, t.csum),
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            Some(7),
            6081,
            false
        )
    );
    let Some(TunnelOpts::Geneve(g)) = &t.opts else {
        panic!("geneve options: {:?}", t.opts)
    };
    assert_eq!(g[0].data.as_deref(), Some(&[0x00, 0x88, 0x00, 0x22][..]));
    let f = run(&mut e, "filter show dev eth0 ingress").stdout;
    assert!(
        f.contains("tunnel_key  set\n\tsrc_ip 10.0.0.1\n\tdst_ip 10.0.0.2\n\tkey_id 7\n\tdst_port 6081\n\tgeneve_opts 0102:80:00880022\n\tnocsum pipe\n\t index 1 ref 1 bind 1"),
        "{f}"
    );
    let j = run(&mut e, "-j filter show dev eth0 ingress").stdout;
    assert!(
        j.contains(
            r#""geneve_opts":[{"class":258,"type":128,"data":[0,136,0,34]}],"flag":"nocsum""#
        ),
        "{j}"
    );

    // A second filter releases it.
    run(&mut e, "filter del dev eth0 parent ffff: prio 1");
    let o = run(
        &mut e,
        "filter add dev eth0 parent ffff: protocol ip prio 1 matchall action tunnel_key unset",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let p = e
        .device_mut("eth0")
        .unwrap()
        .receive(p, &mut Cx::new(0))
        .expect("passes");
    assert!(p.tunnel().is_none());
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    // get_addr's exit(1), before anything reaches the kernel.
    let o = run(
        &mut e,
        "actions add action tunnel_key set src_ip 10.0.0.300 dst_ip 10.0.0.2",
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "Error: any valid address is expected rather than \"10.0.0.300\".\n"
        )
    );
    // Mixed families, and a Geneve option of 2 bytes: the kernel's messages.
    let o = run(
        &mut e,
        "actions add action tunnel_key set src_ip 10.0.0.1 dst_ip fe80::1",
    );
    assert_eq!(o.code, 255);
    assert!(
        o.stderr
            .starts_with("Error: Missing either ipv4 or ipv6 src and dst."),
        "{}",
        o.stderr
    );
    let o = run(
        &mut e,
        "actions add action tunnel_key set src_ip 10.0.0.1 dst_ip 10.0.0.2 geneve_opts 0102:80:4288",
    );
    assert!(
        o.stderr
            .starts_with("Error: Tunnel key geneve option data is less than 4 bytes long."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action tunnel_key set dst_ip 10.0.0.2");
    assert!(
        o.stderr.starts_with("set needs tunnel_key parameters\n"),
        "{}",
        o.stderr
    );
    assert_eq!(run(&mut e, "actions ls action tunnel_key").stdout, "");
}
