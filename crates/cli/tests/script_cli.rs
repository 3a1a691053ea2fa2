//! `tclab script run` on the seeds' scripts, unmodified: seed 004's CBQ and HTB conditioners
//! (fixtures/seed004_*.sh, extracted from the seed as printed) and seed 003's home-gateway policy
//! (examples/seed003/gateway.sh). Each runs under bash with `tc`/`iptables` resolved to tclab, against a
//! scratch store, and the resulting `tc … show` and `iptables -S` must be what the script configures.

mod common;

use common::{fixture, tclab, text};
use std::path::Path;
use std::process::Command;

/// Seed 003's gateway script lives with its simulation example, `examples/seed003/`.
fn seed003_gateway() -> String {
    format!(
        "{}/../../examples/seed003/gateway.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A store in a scratch directory of its own, removed at the end of the test.
fn scratch(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("script-test-{name}"), "policy.json")
}

#[test]
fn seed004_cbq_script_loads_unmodified() {
    let st = scratch("cbq");
    let run = tclab(&st, &["script", "run", &fixture("seed004_cbq.sh")]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let q = text(&tclab(&st, &["tc", "-s", "qdisc", "show", "dev", "ppp0"]));
    for want in [
        "qdisc cbq 1: root refcnt 2 rate 10Mbit (bounded,isolated) prio no-transmit",
        "qdisc sfq 10: parent 1:10 limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec",
        "qdisc sfq 20: parent 1:20 limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec",
        "qdisc ingress ffff: parent ffff:fff1 ----------------",
    ] {
        assert!(q.contains(want), "qdisc show lacks {want:?}:\n{q}");
    }
    let c = text(&tclab(&st, &["tc", "class", "show", "dev", "ppp0"]));
    assert!(
        c.contains("class cbq 1:1 parent 1: rate 220Kbit (bounded,isolated) prio 5"),
        "{c}"
    );
    assert!(
        c.contains("class cbq 1:20 parent 1:1 leaf 20: rate 198Kbit prio 2"),
        "$[9*$UPLINK/10] is 198: {c}"
    );
    let f = text(&tclab(&st, &["tc", "filter", "show", "dev", "ppp0"]));
    assert!(
        f.contains("  match 05000000/0f00ffc0 at 0\n  match 00100000/00ff0000 at 32"),
        "ACK filter: {f}"
    );
    assert_eq!(
        f.matches("flowid 1:10").count(),
        3,
        "TOS, ICMP and ACK filters go to 1:10: {f}"
    );
    let i = text(&tclab(
        &st,
        &["tc", "filter", "show", "dev", "ppp0", "parent", "ffff:"],
    ));
    assert!(
        i.contains("police 0x1 rate 800Kbit burst 10Kb mtu 2Kb action drop"),
        "{i}"
    );
}

#[test]
fn seed004_htb_script_loads_unmodified() {
    let st = scratch("htb");
    let run = tclab(&st, &["script", "run", &fixture("seed004_htb.sh")]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let q = text(&tclab(&st, &["tc", "qdisc", "show", "dev", "ppp0"]));
    assert!(
        q.starts_with("qdisc htb 1: root refcnt 2 r2q 10 default 0x20 direct_packets_stat 0"),
        "{q}"
    );
    let c = text(&tclab(&st, &["tc", "class", "show", "dev", "ppp0"]));
    assert!(
        c.contains("class htb 1:20 parent 1:1 leaf 20: prio 2 rate 198Kbit ceil 198Kbit burst 6Kb"),
        "{c}"
    );
    let f = text(&tclab(&st, &["tc", "filter", "show", "dev", "ppp0"]));
    assert_eq!(f.matches("flowid 1:10").count(), 3, "{f}");
}

#[test]
fn seed003_gateway_policy_loads_with_its_marks() {
    let st = scratch("gw");
    let run = tclab(&st, &["script", "run", &seed003_gateway()]);
    assert!(run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("Bad argument `22'\nTry `iptables -h'"),
        "the article's `-dport 22` fails as it does on Linux: {err}"
    );
    assert!(text(&run).ends_with("Traffic Control is up and running\n"));
    let s = text(&tclab(
        &st,
        &["iptables", "-t", "mangle", "-S", "POSTROUTING"],
    ));
    assert_eq!(
        s,
        "-P POSTROUTING ACCEPT
-A POSTROUTING -o eth0 -p udp -j CONNMARK --set-xmark 0x64/0xffffffff
-A POSTROUTING -o eth0 -p tcp -m tcp --dport 80 --tcp-flags SYN SYN -j CONNMARK --set-xmark 0x190/0xffffffff
-A POSTROUTING -o eth0 -p tcp -m tcp --dport 443 --tcp-flags SYN SYN -j CONNMARK --set-xmark 0x190/0xffffffff
-A POSTROUTING -o eth0 -p tcp -m connbytes --connbytes 10000000 --connbytes-mode bytes --connbytes-dir both -j CONNMARK --set-xmark 0x3e7/0xffffffff
-A POSTROUTING -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff
-A POSTROUTING -p tcp -m tcp --tcp-flags FIN,SYN,RST,PSH,ACK,URG ACK -m length --length 40:64 -j MARK --set-xmark 0xc8/0xffffffff
"
    );
    let f = text(&tclab(&st, &["tc", "filter", "show", "dev", "eth0"]));
    for h in [
        "handle 0x64 classid 1:100",
        "handle 0xc8 classid 1:200",
        "handle 0x12c classid 1:300",
        "handle 0x190 classid 1:400",
        "handle 0x3e7 classid 1:999",
    ] {
        assert!(f.contains(h), "fw filter {h}: {f}");
    }
    let q = text(&tclab(&st, &["tc", "qdisc", "show", "dev", "eth0"]));
    assert!(
        q.contains("qdisc htb 1: root refcnt 2 r2q 40 default 0x999"),
        "{q}"
    );
    assert!(q.contains("qdisc sfq 1300: parent 1:300 limit 32p"), "{q}");
    let l = text(&tclab(
        &st,
        &["iptables", "-t", "mangle", "-L", "POSTROUTING", "-n", "-v"],
    ));
    assert!(l.contains("    0     0 CONNMARK   0    --  *      *       0.0.0.0/0            0.0.0.0/0            CONNMARK restore\n"), "{l}");
}

#[test]
fn every_spelling_of_the_commands_reaches_tclab() {
    let st = scratch("names");
    let dir = st.parent().unwrap();
    let script = dir.join("names.sh");
    std::fs::write(
        &script,
        r#"#!/bin/sh
TC=/usr/sbin/tc
IPT=/sbin/iptables
$TC qdisc add dev eth1 root handle 1: htb default 10
env tc class add dev eth1 parent 1: classid 1:10 htb rate $((1000/2))kbit
sudo /sbin/iptables -t mangle -A OUTPUT -p tcp --sport 80 -j MARK --set-mark 80
echo -A FORWARD -j RETURN | xargs iptables -t mangle
ip link set dev eth1 mtu 1400 txqueuelen 50
ifconfig eth2 mtu 1300 up
modprobe sch_htb
ip route add default via 10.0.0.1
ip6tables -t mangle -L && exit 9
$IPT -t mangle -A OUTPUT -j NOSUCH
echo "status $?"
"#,
    )
    .unwrap();
    let run = tclab(&st, &["script", "run", script.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{err}");
    assert_eq!(
        text(&run),
        "status 2\n",
        "iptables' own exit status reaches the script"
    );
    assert!(err.contains("ip6tables: not supported by tclab"), "{err}");
    assert!(
        err.contains("ignoring \"ip route add default via 10.0.0.1\""),
        "{err}"
    );
    let c = text(&tclab(&st, &["tc", "class", "show", "dev", "eth1"]));
    assert!(c.contains("rate 500Kbit"), "{c}");
    let s = text(&tclab(&st, &["iptables", "-t", "mangle", "-S"]));
    assert!(
        s.contains("-A OUTPUT -p tcp -m tcp --sport 80 -j MARK --set-xmark 0x50/0xffffffff\n"),
        "{s}"
    );
    assert!(
        s.contains("-A FORWARD -j RETURN\n"),
        "xargs found the wrapper in PATH: {s}"
    );
    let l = text(&tclab(&st, &["link", "show"]));
    assert!(l.contains("eth1: mtu 1400") && l.contains("qlen 50"), "{l}");
    assert!(l.contains("eth2: mtu 1300"), "{l}");
}

/// A refused `ip route` line (ip's own refusal of a misspelt `realm`) is a refusal like tc's: in the
/// report, and fatal under --strict (it was neither, as the line has no `realm` word).
#[test]
fn a_refused_route_line_is_reported_and_fatal_under_strict() {
    let st = scratch("route-refused");
    let script = st.parent().unwrap().join("routes.sh");
    std::fs::write(
        &script,
        "ip route add 10.0.3.0/24 dev eth0 realm 7\nip route add 10.0.4.0/24 dev eth0 relm 7\n",
    )
    .unwrap();
    let run = tclab(&st, &["script", "run", script.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(err.contains("1 command applied, 1 refused"), "{err}");
    assert!(
        err.contains("routes.sh:2: ")
            && err.contains("Error: either \"to\" is duplicate, or \"relm\" is a garbage."),
        "{err}"
    );
    let strict = tclab(
        &st,
        &["script", "run", "--strict", script.to_str().unwrap()],
    );
    assert!(
        !strict.status.success(),
        "{}",
        String::from_utf8_lossy(&strict.stderr)
    );
}

#[test]
fn script_help_says_what_is_replaced() {
    let st = scratch("help");
    let h = text(&tclab(&st, &["script", "run", "--help"]));
    for w in [
        "/sbin/tc",
        "/opt/sbin/tc",
        "whatever its directory",
        "private mount namespace",
        "ip6tables",
        "modprobe",
        "ip link set",
        "ifconfig",
        "noted on stderr",
    ] {
        assert!(h.contains(w), "help mentions {w}: {h}");
    }
}

#[test]
fn script_to_journal_for_the_simulator() {
    use tclab_core::netfilter::{Hook, NfVerdict};
    // No tclab binary named: bash's tc and iptables calls reach this process's engine by themselves.
    let journal = tclab_tc::script::run_script_to_journal(
        None,
        Path::new(&seed003_gateway()),
        &["eth0".to_string()],
        &[],
    )
    .expect("the script runs")
    .journal;
    assert!(journal.iter().any(|e| e[0] == "iptables"));
    assert!(journal
        .iter()
        .all(|e| ["tc", "iptables", "link"].contains(&e[0].as_str())));
    let (mut engine, problems) = tclab_tc::store::replay(&journal);
    assert!(problems.is_empty(), "{problems:?}");
    // An HTTP connection: the SYN sets the connection mark 400, the restore rule copies it to every
    // packet of the connection; a bare ACK on it is re-marked 200 by the last rule.
    let pkt = |flags: u8, payload: u16| {
        let mut d = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 93, 184, 216, 34,
        ];
        d[2..4].copy_from_slice(&(40 + payload).to_be_bytes());
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[12] = 0x50;
        t[13] = flags;
        d.extend(t);
        tclab_core::Packet {
            data: d,
            len: 54 + payload as u32,
            protocol: 0x0800,
            ..Default::default()
        }
    };
    let nf = engine.netfilter_mut();
    let mut marks = Vec::new();
    for (i, (flags, payload)) in [(0x02, 0), (0x18, 500), (0x10, 0)].into_iter().enumerate() {
        let mut p = pkt(flags, payload);
        assert_eq!(
            nf.hook(Hook::LocalOut, &mut p, None, Some("eth0"), i as u64),
            NfVerdict::Accept
        );
        assert_eq!(
            nf.hook(Hook::PostRouting, &mut p, None, Some("eth0"), i as u64),
            NfVerdict::Accept
        );
        marks.push(p.mark);
    }
    assert_eq!(
        marks,
        vec![400, 400, 200],
        "SYN and data in 1:400, the bare ACK in 1:200"
    );
}

#[test]
fn no_spelling_of_tc_reaches_the_hosts_tc() {
    // Each line configures a device this host does not have, by a route around plain `tc`: the
    // `env`/`command`/`sudo -u` functions catch the first three; the wrappers first in PATH catch `xargs`;
    // a private mount namespace that covers the real binaries catches the rest (absolute paths through
    // `nohup`, `exec` in a subshell after the script reset PATH). If a line reached the host's tc it would
    // fail ("Cannot find device") and the device would be missing from tclab's store. Redirections with
    // `exec` must keep working.
    let st = scratch("escape");
    let dir = st.parent().unwrap().to_path_buf();
    let mount_ns = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let mut lines = vec![
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin",
        "env /sbin/tc qdisc add dev esc1 root handle 1: htb",
        "command /usr/sbin/tc qdisc add dev esc2 root handle 1: htb",
        "sudo -u root tc qdisc add dev esc3 root handle 1: htb",
        "exec 3>\"$(dirname \"$0\")/fd3.txt\"; echo kept >&3",
    ];
    let mut want = vec!["esc1", "esc2", "esc3"];
    if mount_ns {
        lines.push("echo qdisc add dev esc4 root handle 1: htb | xargs tc");
        lines.push("nohup /usr/sbin/tc qdisc add dev esc5 root handle 1: htb >/dev/null 2>&1");
        lines.push("( exec tc qdisc add dev esc6 root handle 1: htb )");
        want.extend(["esc4", "esc5", "esc6"]);
    } else {
        eprintln!(
            "no private mount namespace here: the xargs/nohup/exec spellings are not checked"
        );
    }
    let script = dir.join("escape.sh");
    std::fs::write(&script, lines.join("\n") + "\n").unwrap();
    let run = tclab(&st, &["script", "run", script.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run));
    let shown = String::from_utf8_lossy(&tclab(&st, &["tc", "qdisc", "show"]).stdout).into_owned();
    for dev in want {
        assert!(
            shown.contains(&format!("dev {dev} root")),
            "{dev} configured in tclab: {shown}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("fd3.txt")).unwrap(),
        "kept\n"
    );
}

/// Seed 000's authors lost days to commands that silently did not apply (`2>/dev/null`): the report names
/// each refusal with its script line even so, and `--strict` stores nothing when one happens (issue 12).
#[test]
fn refusals_are_reported_and_strict_stores_nothing() {
    let st = scratch("report");
    let script = st.with_file_name("typo.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\n\
         DEV=eth0\n\
         tc qdisc del dev $DEV root 2>/dev/null\n\
         tc qdisc add dev $DEV root handle 1: htb default 20\n\
         tc class add dev $DEV parent 1: classid 1:20 htb rate 180kbit 2>/dev/null\n\
         tc class add dev $DEV parent 1: classid 1:30 htb rate 18O0kbit 2>/dev/null\n\
         echo done\n",
    )
    .unwrap();
    let run = tclab(&st, &["script", "run", script.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{err}");
    assert!(
        err.contains("tclab script: 2 commands applied, 2 refused (1 of them a deletion of something that was not there)"),
        "{err}"
    );
    assert!(err.contains("typo.sh:6: tc class add dev eth0 parent 1: classid 1:30 htb rate 18O0kbit\n    Illegal \"rate\"\n"), "{err}");
    assert!(
        err.contains("typo.sh:3: tc qdisc del dev eth0 root\n"),
        "{err}"
    );
    assert!(!err.contains("Usage:"), "the usage text is left out: {err}");
    // --strict on a fresh store: the typo is fatal and nothing is kept.
    let st2 = scratch("strict");
    let run = tclab(
        &st2,
        &["script", "run", "--strict", script.to_str().unwrap()],
    );
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--strict: nothing was stored"));
    let shown = tclab(&st2, &["tc", "qdisc", "show", "dev", "eth0"]);
    assert!(!shown.status.success(), "eth0 was never created");
    // Fixed, it applies whole.
    std::fs::write(
        &script,
        std::fs::read_to_string(&script)
            .unwrap()
            .replace("18O0", "1800"),
    )
    .unwrap();
    let run = tclab(
        &st2,
        &["script", "run", "--strict", script.to_str().unwrap()],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        text(&tclab(&st2, &["tc", "class", "show", "dev", "eth0"]))
            .lines()
            .count(),
        2
    );
}

#[test]
fn sqm_layer_cake_applies_whole() {
    // sqm-scripts' layer_cake.qos on an ADSL line (fixtures/sqm_layer_cake.sh: the recipe's calls in
    // order, its qdisc probes included): CAKE on eth0 and on the ifb its ingress redirects to. The only
    // refusals are sqm's own silenced deletions of what is not there yet.
    let st = scratch("sqm-cake");
    let run = tclab(&st, &["script", "run", &fixture("sqm_layer_cake.sh")]);
    let report = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{report}");
    assert!(
        report.contains(
            "14 commands applied, 3 refused (3 of them a deletion of something that was not there)"
        ),
        "{report}"
    );
    let q = text(&tclab(&st, &["tc", "qdisc", "show"]));
    for want in [
        "dev eth0 root refcnt 2 bandwidth 950Kbit diffserv3 triple-isolate nat nowash no-ack-filter split-gso rtt 100ms atm overhead 44 ",
        "qdisc ingress ffff: dev eth0 parent ffff:fff1 ----------------",
        "dev ifb4eth0 root refcnt 2 bandwidth 9500Kbit diffserv3 triple-isolate nat wash no-ack-filter split-gso rtt 100ms atm overhead 44 ",
    ] {
        assert!(q.contains(want), "qdisc show lacks {want:?}:\n{q}");
    }
    assert!(!q.contains("SQM_IFB"), "the probes' ifbs are gone:\n{q}");
    let f = text(&tclab(
        &st,
        &["tc", "filter", "show", "dev", "eth0", "parent", "ffff:"],
    ));
    assert!(
        f.contains("mirred (Egress Redirect to device ifb4eth0) stolen"),
        "{f}"
    );
}

/// Write `body` as script `name` beside the store `st`, run it with `tclab script run`, and give its exit
/// status, stdout and stderr.
fn script_beside(st: &Path, name: &str, body: &str) -> (Option<i32>, String, String) {
    let script = st.parent().unwrap().join(name);
    std::fs::write(&script, body).unwrap();
    let run = tclab(st, &["script", "run", script.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    (run.status.code(), text(&run), err)
}

#[test]
fn the_ifb_module_loads_once_and_unloads_every_ifb() {
    // What the kernel does: `modprobe ifb numifbs=N` creates ifb0…ifbN-1 when the module loads and
    // nothing when it is loaded already; `rmmod ifb` (or `modprobe -r ifb`) deletes every ifb device,
    // whatever its name, and fails when the module is not loaded (kmod's words); `ifconfig DEV up`
    // brings a device up as `ip link set DEV up` does (an ifb starts down).
    let st = scratch("ifb");
    let run_script = |name: &str, body: &str| {
        let (code, out, err) = script_beside(&st, name, body);
        assert_eq!(code, Some(0), "{err}");
        (out, err)
    };
    let (out, err) = run_script(
        "load.sh",
        "modprobe -r ifb; echo \"unload when not loaded: $?\"\n\
         modprobe ifb numifbs=1\n\
         ifconfig ifb0 up txqueuelen 5\n\
         ip link add ifb-wan type ifb\n\
         modprobe ifb numifbs=3; echo \"load when loaded: $?\"\n",
    );
    assert_eq!(out, "unload when not loaded: 1\nload when loaded: 0\n");
    assert!(
        err.contains("modprobe: FATAL: Module ifb is not in kernel."),
        "{err}"
    );
    assert_eq!(
        text(&tclab(&st, &["link", "show", "type", "ifb"])),
        "1: ifb-wan: mtu 1500 qdisc noop state DOWN qlen 32\n\
         2: ifb0: mtu 1500 qdisc pfifo_fast state UP qlen 5\n"
    );
    let (out, err) = run_script(
        "unload.sh",
        "rmmod ifb; echo \"rmmod: $?\"\nrmmod ifb; echo \"rmmod again: $?\"\n",
    );
    assert_eq!(out, "rmmod: 0\nrmmod again: 1\n");
    assert!(
        err.contains("rmmod: ERROR: Module ifb is not currently loaded"),
        "{err}"
    );
    assert_eq!(text(&tclab(&st, &["link", "show", "type", "ifb"])), "");
}

#[test]
fn scripts_run_as_bash_would_run_them() {
    // What bash does with the same script on Linux, each case found by a new-user review:
    let st = scratch("as-bash");
    let dir = st.parent().unwrap();
    let run_script = |name: &str, body: &str| script_beside(&st, name, body);
    // A script's own `tc()` that calls `command tc` (or `sudo tc`) reaches tc once, not itself again;
    // `command -v tc` names an executable file.
    let (code, out, err) = run_script(
        "wrap.sh",
        "tc() { echo \"+ tc $*\" >&2; command tc \"$@\"; }\n\
         tc qdisc add dev eth0 root handle 1: htb\n\
         tc2() { sudo tc \"$@\"; }\n\
         tc2 qdisc show dev eth0\n\
         [ -x \"$(command -v tc)\" ] && echo tc is a program\n\
         command -v ip >/dev/null && echo ip found\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "qdisc htb 1: root refcnt 2 r2q 10 default 0 direct_packets_stat 0 direct_qlen 1000\n\
         tc is a program\nip found\n"
    );
    assert_eq!(err.matches("+ tc").count(), 1, "{err}");
    // Options on the `#!` line are bash's: `-e` stops at the first failure.
    let (code, out, _) = run_script("e.sh", "#!/bin/bash -e\nfalse\necho not reached\n");
    assert_eq!((code, out.as_str()), (Some(1), ""));
    // A `-force` batch with continued lines counts each line: applied, and each one refused; under
    // `set -u`, `ip` alone and `ifconfig DEV mtu` (no value) fail as the tools do, never hang.
    std::fs::write(
        dir.join("cont.batch"),
        "class add dev eth9 parent 1: classid 1:12 \\\n  htb rate 1mbit\n\
         class add dev eth9 parent 1: classid 1:12 htb rate 1mbit\n\
         class add dev eth9 parent 1: classid 1:13 htb rate 1mbit\n\
         class add dev eth9 parent 1: classid 1:13 htb rate 1mbit\n",
    )
    .unwrap();
    let (code, out, err) = script_beside(
        &st,
        "cont.sh",
        "cd \"$(dirname \"$0\")\"\ntc qdisc add dev eth9 root handle 1: htb\ntc -force -batch cont.batch\n\
         set -u\nip 2>/dev/null; echo \"ip: $?\"\nifconfig eth0 mtu 2>/dev/null; echo \"ifconfig: $?\"\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "ip: 255\nifconfig: 1\n");
    assert!(err.contains("3 commands applied, 2 refused"), "{err}");
    assert!(
        err.contains("Command failed cont.batch:3") && err.contains("Command failed cont.batch:5"),
        "{err}"
    );
    // `set -e` with `trap … ERR`: a failing tc runs the trap, as a failing program does.
    let (code, _, err) = script_beside(
        &st,
        "trap.sh",
        "set -e\ntrap 'echo ERR fired >&2' ERR\ntc qdisc add dev eth0 root handle 1: htb bogus\necho no\n",
    );
    assert_eq!(code, Some(1));
    assert!(err.contains("ERR fired"), "{err}");
    // A job the script leaves behind, calling tc after the script ended, applies nothing and is told.
    let (code, _, _) = run_script(
        "late.sh",
        "cd \"$(dirname \"$0\")\"\n\
         ( sleep 0.5; tc qdisc del dev eth0 root 2>>late.err; echo \"late: $?\" >>late.err ) &\n\
         ( sleep 0.5; \"$TCLAB_EXE\" tc qdisc del dev eth0 root 2>>late.err; echo \"late exe: $?\" >>late.err ) &\n",
    );
    assert_eq!(code, Some(0));
    let late = dir.join("late.err");
    let t0 = std::time::Instant::now();
    let both = |t: String| t.contains("late:") && t.contains("late exe:");
    while !both(std::fs::read_to_string(&late).unwrap_or_default()) && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let said = std::fs::read_to_string(&late).unwrap_or_default();
    assert!(
        said.contains("the script has ended; this call was not applied"),
        "{said}"
    );
    assert!(said.contains("late: 1"), "{said}");
    // A tclab the job runs itself is refused too, rather than write to the store behind the report.
    assert!(
        said.contains("the script that started this call has ended"),
        "{said}"
    );
    assert!(said.contains("late exe: 1"), "{said}");
    assert!(text(&tclab(&st, &["tc", "qdisc", "show", "dev", "eth0"])).starts_with("qdisc htb 1:"));
    // A long answer arrives whole (it streams), and `tc -batch FILE`'s messages name FILE.
    let mut batch = String::new();
    for i in 0..600 {
        batch.push_str(&format!(
            "class add dev eth0 parent 1: classid 1:{:x} htb rate 1mbit\n",
            i + 16
        ));
    }
    batch.push_str("class add dev eth0 parent 1: classid 1:10 htb rate 1mbit\n");
    std::fs::write(dir.join("classes.batch"), batch).unwrap();
    let (code, out, err) = run_script(
        "long.sh",
        "cd \"$(dirname \"$0\")\"\ntc -batch classes.batch; echo \"batch: $?\"\n\
         tc -s class show dev eth0 | grep -c '^class htb'\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "batch: 1\n600\n");
    assert!(err.contains("Command failed classes.batch:601"), "{err}");
}

#[test]
fn every_way_of_reaching_tc_and_ip_reaches_tclab() {
    // A script reaches tc and ip by name, by path, through env, timeout, nohup and xargs, or through
    // the path `command -v` gave it: each call is tclab's (the host's devices and qdiscs untouched),
    // and a refusal is reported at the script's own line.
    let st = scratch("reach");
    let (code, out, err) = script_beside(
        &st,
        "reach.sh",
        "env /sbin/tc qdisc add dev tclabq0 root handle 1: htb\n\
         env LC_ALL=C ip link add tclabq1 type ifb\n\
         timeout 5 ip link add tclabq2 type ifb\n\
         echo tclabq3 | xargs -I{} ip link add {} type ifb\n\
         nohup /usr/sbin/tc qdisc add dev tclabq0 ingress 2>/dev/null\n\
         TC=$(command -v tc)\n\
         $TC qdisc add dev tclabq0 root nonsense\n\
         echo \"which: $(which tc | grep -c /)\"\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "which: 1\n");
    assert!(err.contains("5 commands applied, 1 refused"), "{err}");
    assert!(
        err.contains("reach.sh:7: tc qdisc add dev tclabq0 root nonsense"),
        "{err}"
    );
    let links = text(&tclab(&st, &["link", "show"]));
    for d in ["tclabq0", "tclabq1", "tclabq2", "tclabq3"] {
        assert!(
            links.contains(&format!(": {d}:")),
            "{d} in tclab's store:\n{links}"
        );
        let host = Command::new("ip").args(["link", "show", d]).output();
        assert!(
            !host.is_ok_and(|o| o.status.success()),
            "{d} was created on the host"
        );
    }
    // `#!/usr/bin/env -S bash -e`: env splits, bash gets -e.
    let (code, out, _) = script_beside(
        &st,
        "envs.sh",
        "#!/usr/bin/env -S bash -e\nfalse\necho no\n",
    );
    assert_eq!((code, out.as_str()), (Some(1), ""));
}

#[test]
fn an_interrupted_script_run_reports_and_cleans_up() {
    // SIGTERM to tclab (a `timeout`, a `kill`): the script gets it too, as it would from a shell, and
    // tclab ends as on any other end — the report, the scratch directory removed — with 128 + 15.
    let st = scratch("interrupt");
    let script = st.parent().unwrap().join("slow.sh");
    std::fs::write(
        &script,
        "tc qdisc add dev eth0 root handle 1: htb\necho started\nsleep 30 >/dev/null 2>&1\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tclab"))
        .args(["script", "run", script.to_str().unwrap()])
        .env("TCLAB_STATE", &*st)
        .env_remove("TCLAB_CONTROL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 8];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    assert_eq!(&first, b"started\n");
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed().as_secs() < 10, "tclab did not end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("1 command applied, 0 refused"), "{err}");
    let leftover = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("tclab-script-{pid}-"))
        });
    assert!(!leftover, "the scratch directory was removed");
}

/// Whether a private mount namespace can be made here (root), in which tclab puts its wrappers at the
/// paths of tc and its kin.
fn mount_namespace() -> bool {
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A script (`paths.sh`) and the file it sources (`lib.sh`) that reach tc, ip and iptables by paths
/// in directories the host lacks — Entware's /opt/sbin (asuswrt-merlin's add-ons), /usr/local/sbin, a
/// router's /jffs — literal, built as the script runs, after an assignment, in a function from the
/// sourced file, in a command substitution and in a subshell. Devices `tclabpN`.
const PATHS_SH: &str = r#"PREFIX=/opt
TC=/opt/sbin/tc
$TC qdisc add dev tclabp1 root handle 1: htb
/usr/local/sbin/tc qdisc add dev tclabp2 root handle 1: htb
"${PREFIX}/sbin/tc" qdisc add dev tclabp3 root handle 1: htb
/opt/bin/ip link add tclabp4 type ifb
. "$(dirname "$0")/lib.sh"
shape tclabp5
LC_ALL=C /jffs/scripts/bin/tc qdisc add dev tclabp6 root handle 1: htb
n=$(${TC:-/sbin/tc} qdisc show dev tclabp1 | grep -c htb); echo "in a command substitution: $n"
( IPT6=/opt/usr/sbin/ip6tables; $IPT6 -t mangle -L 2>/dev/null; echo "ip6tables: $?" )
$TC qdisc add dev tclabp1 root nonsense 2>/dev/null
echo last; echo "\$_ is $_"
"#;
const LIB_SH: &str = r#"IPT=/opt/sbin/iptables
shape() {
  "$PREFIX/sbin/tc" qdisc add dev "$1" root handle 1: htb
  $IPT -t mangle -A POSTROUTING -o "$1" -j MARK --set-mark 5
  $TC qdisc add dev "$1" root bogus 2>/dev/null
}
"#;

/// What `paths.sh` must have done, in the store at `st`, given its stdout and stderr.
fn check_paths_run(st: &Path, out: &str, err: &str) {
    assert_eq!(
        out, "in a command substitution: 1\nip6tables: 1\nlast\n$_ is last\n",
        "{err}"
    );
    // Five qdiscs, one ifb, one rule; the two refusals at their own lines, one in the sourced file.
    assert!(err.contains("7 commands applied, 2 refused"), "{err}");
    assert!(
        err.contains("lib.sh:5: tc qdisc add dev tclabp5 root bogus"),
        "{err}"
    );
    assert!(
        err.contains("paths.sh:12: tc qdisc add dev tclabp1 root nonsense"),
        "{err}"
    );
    let q = text(&tclab(st, &["tc", "qdisc", "show"]));
    for d in ["tclabp1", "tclabp2", "tclabp3", "tclabp5", "tclabp6"] {
        assert!(q.contains(&format!("dev {d} root")), "{d}: {q}");
    }
    assert!(text(&tclab(st, &["link", "show"])).contains(": tclabp4:"));
    assert_eq!(
        text(&tclab(
            st,
            &["iptables", "-t", "mangle", "-S", "POSTROUTING"]
        )),
        "-P POSTROUTING ACCEPT\n-A POSTROUTING -o tclabp5 -j MARK --set-xmark 0x5/0xffffffff\n"
    );
    let host = Command::new("ip")
        .args(["link", "show", "tclabp4"])
        .output();
    assert!(
        !host.is_ok_and(|o| o.status.success()),
        "tclabp4 on the host"
    );
}

#[test]
fn a_command_is_tclabs_by_its_name_in_any_directory() {
    // Issue 28: scripts for asuswrt-merlin call Entware's /opt/sbin/tc; tclab covered a fixed list of
    // spellings (/sbin/tc, /usr/sbin/tc…), so those calls failed ("No such file or directory") or, where
    // the file existed, reached the host's tc. Every call of PATHS_SH must reach tclab.
    let st = scratch("paths");
    let dir = st.parent().unwrap();
    let opt_existed = Path::new("/opt/sbin").exists();
    std::fs::write(dir.join("lib.sh"), LIB_SH).unwrap();
    let (code, out, err) = script_beside(&st, "paths.sh", PATHS_SH);
    assert_eq!(code, Some(0), "{err}");
    check_paths_run(&st, &out, &err);
    // `set -x` shows the script's command as bash ran it, not tclab's functions.
    let (code, _, err) = script_beside(
        &st,
        "traced.sh",
        "TC=/opt/sbin/tc\nset -x\n$TC qdisc add dev tclabp7 root handle 1: htb\nset +x\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.starts_with("+ /opt/sbin/tc qdisc add dev tclabp7 root handle 1: htb\n+ set +x\n"),
        "{err}"
    );
    assert_eq!(
        Path::new("/opt/sbin").exists(),
        opt_existed,
        "the host's /opt is unchanged"
    );
}

#[test]
fn programs_that_are_not_bash_find_the_wrappers_at_any_path_as_root() {
    // As root, the script's mount namespace has tclab's wrappers at the system's, /usr/local's and
    // /opt's paths, added where the host has none: `xargs`, `nohup`, `exec` and `sh -c` (dash on
    // Debian, which has no shell functions) reach tclab by those paths too. The host sees none of it.
    if !mount_namespace() || !Path::new("/opt").is_dir() || !Path::new("/usr/local").is_dir() {
        eprintln!("no private mount namespace, /opt or /usr/local here: not checked");
        return;
    }
    let st = scratch("paths-exec");
    let opt_existed = Path::new("/opt/sbin").exists();
    let (code, out, err) = script_beside(
        &st,
        "exec.sh",
        "echo qdisc add dev tclabx1 root handle 1: htb | xargs /opt/sbin/tc\n\
         nohup /usr/local/bin/ip link add tclabx2 type ifb >/dev/null 2>&1\n\
         ( PATH=/nonexistent; exec /opt/usr/sbin/tc qdisc add dev tclabx3 root handle 1: htb )\n\
         sh -c '/opt/bin/tc qdisc add dev tclabx4 root handle 1: htb'\n\
         [ -x /opt/sbin/tc ] && echo found\n",
    );
    assert_eq!((code, out.as_str()), (Some(0), "found\n"), "{err}");
    assert!(err.contains("4 commands applied, 0 refused"), "{err}");
    let q = text(&tclab(&st, &["tc", "qdisc", "show"]));
    for d in ["tclabx1", "tclabx3", "tclabx4"] {
        assert!(q.contains(&format!("dev {d} root")), "{d}: {q}");
    }
    assert!(text(&tclab(&st, &["link", "show"])).contains(": tclabx2:"));
    assert_eq!(
        Path::new("/opt/sbin").exists(),
        opt_existed,
        "the host's /opt is unchanged"
    );
    assert!(!Path::new("/usr/local/bin/ip").exists() || Path::new("/usr/local/bin/ip").is_file());
}

#[test]
fn without_root_a_path_in_any_directory_still_reaches_tclab() {
    // Without root there is no mount namespace: the shell functions, defined as the script runs for
    // whatever path it builds, are what reaches tclab. Run as nobody when the tests run as root.
    let st = scratch("paths-user");
    let dir = st.parent().unwrap().to_path_buf();
    std::fs::write(dir.join("lib.sh"), LIB_SH).unwrap();
    std::fs::write(dir.join("paths.sh"), PATHS_SH).unwrap();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let mut c = if root {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_tclab"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_tclab"))
    };
    let run = c
        .args(["script", "run", dir.join("paths.sh").to_str().unwrap()])
        .env("TCLAB_STATE", &*st)
        .env_remove("TCLAB_CONTROL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    if root && err.contains("setpriv") {
        eprintln!("cannot run as nobody here: not checked ({err})");
        return;
    }
    assert!(run.status.success(), "{err}");
    check_paths_run(&st, &text(&run), &err);
}

#[test]
fn ethtool_sets_the_link_speed_taprio_times_its_schedule_by() {
    // `ethtool -s DEV speed N` reaches `tclab link set dev DEV speed N` (its other settings are noted
    // and ignored): at 100 Mbit/s a 60-byte frame takes 4.8 us, so 5-us entries are long enough;
    // at the 10 Mbit/s of a device without a speed they are not (48 us).
    let st = scratch("ethtool-speed");
    let taprio = "tc qdisc add dev eth0 root handle 1: taprio num_tc 2 queues 1@0 1@1 \
                  sched-entry S 01 5000 sched-entry S 02 5000 clockid CLOCK_TAI";
    let (code, _, err) = script_beside(
        &st,
        "slow.sh",
        &format!("#!/bin/bash\nip link add dev eth0 numtxqueues 4 type dummy\n{taprio}\n"),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("Invalid interval for schedule entry"), "{err}");
    let (code, _, err) = script_beside(
        &st,
        "fast.sh",
        &format!("#!/bin/bash\nethtool -s eth0 speed 100 duplex full\n{taprio}\n"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("ignoring ethtool setting \"duplex full\""),
        "{err}"
    );
    assert!(
        text(&tclab(&st, &["tc", "qdisc", "show", "dev", "eth0"])).starts_with("qdisc taprio 1:")
    );
}

#[test]
fn ethtool_k_takes_the_names_ethtool_takes_and_refuses_others_as_it_does() {
    // This machine's ethtool 6.1 (on a veth of a namespace of its own): `-K DEV TSO off` (names are
    // case-sensitive) exits 92 with "netlink error: bit name not found", changing nothing; `tso maybe`
    // exits 1 ("… is not followed by 'on' or 'off'"); `-K DEV` alone exits 1 ("Could not change any
    // device features"); a name it knows that tclab does not model (`rx-gro`) is noted and succeeds;
    // a device that does not exist: "netlink error: no device matches name", exit 92 (75 for `-s`).
    let st = scratch("ethtool-names");
    for (body, code, said) in [
        (
            "ethtool -K eth0 gso off TSO off",
            92,
            "netlink error: bit name not found",
        ),
        (
            "ethtool -K eth0 tso maybe",
            1,
            "ethtool (-K): flag 'maybe' for parameter 'tso' is not followed by 'on' or 'off'",
        ),
        ("ethtool -K eth0", 1, "Could not change any device features"),
        // No ifb0 made: exit 92 for -K, 75 for -s, and not the `link set` tclab makes of it.
        (
            "ethtool -K ifb0 tso off",
            92,
            "netlink error: no device matches name",
        ),
        (
            "ethtool -s ifb0 speed 100",
            75,
            "netlink error: no device matches name",
        ),
        (
            "ethtool -K eth0 rx-gro off generic-segmentation-offload off",
            0,
            "ignoring ethtool feature \"rx-gro off\"",
        ),
    ] {
        let (got, _, err) = script_beside(&st, "k.sh", &format!("#!/bin/bash\n{body}\n"));
        assert_eq!(got, Some(code), "{body}: {err}");
        assert!(err.contains(said), "{body}: {err}");
        assert!(
            !err.contains("link set"),
            "a command the script did not write: {err}"
        );
    }
    // Only the last script changed anything (ethtool checks every name before it changes one): eth0's
    // GSO, by its long name, is in the store's journal; the first script's `gso off` is not.
    let journal = std::fs::read_to_string(&*st).unwrap();
    assert!(
        journal.contains("generic-segmentation-offload") && !journal.contains("\"gso\""),
        "{journal}"
    );
    // `sg` and `tx` are applied, not noted: Linux 6.12's netdev_fix_features keeps no TSO or GSO
    // without scatter-gather, no TSO without checksumming (`ethtool -k` on a veth of this machine after
    // `-K sg off`: tcp-segmentation-offload and generic-segmentation-offload off "[not requested]").
    let (got, _, err) = script_beside(
        &st,
        "sg.sh",
        "#!/bin/bash\nethtool -K eth0 scatter-gather off tx off\n",
    );
    assert_eq!(got, Some(0), "{err}");
    assert!(!err.contains("ignoring"), "{err}");
    let journal = std::fs::read_to_string(&*st).unwrap();
    assert!(
        journal.contains("\"scatter-gather\",\"off\",\"tx\",\"off\""),
        "{journal}"
    );
}

#[test]
fn ethtool_refusals_and_notes_name_the_script_line_and_k_shows_the_features() {
    // A refused ethtool call is listed in the summary with its line, as tc's are (it used to end in
    // "0 commands applied, 0 refused"); its notes name the line too. `ethtool -k` prints what ethtool
    // 6.1 prints for these features on a veth of this machine: "Features for DEV:", then "NAME: on|off",
    // "off [requested on]" for what netdev_fix_features dropped (after `-K sg off`: TSO and GSO).
    let st = scratch("ethtool-report");
    let (code, out, err) = script_beside(
        &st,
        "e.sh",
        "#!/bin/bash\nethtool -K eth0 rx-gro off sg off\nethtool -k eth0\nethtool -K eth0 bogus off\n",
    );
    assert_eq!(code, Some(92), "{err}");
    assert!(
        err.contains("/e.sh:2: ignoring ethtool feature \"rx-gro off\""),
        "{err}"
    );
    assert!(
        err.contains("1 command applied, 1 refused\n")
            && err.contains(
                "/e.sh:4: ethtool -K eth0 bogus off\n    netlink error: bit name not found"
            ),
        "{err}"
    );
    assert_eq!(
        out,
        "Features for eth0:\ntx-checksumming: on\nscatter-gather: off\n\
         tcp-segmentation-offload: off [requested on]\n\
         generic-segmentation-offload: off [requested on]\n"
    );
}

#[test]
fn a_scripts_writes_to_proc_sys_do_not_reach_the_host_as_root() {
    // bash makes `echo V > /proc/sys/…` (or /sys/…) itself, no command tclab answers: as root, the script's mount
    // namespace has /proc/sys and /sys read-only, so the write fails and the host's setting stays. The script
    // writes back the value it read, so that the host is unchanged whatever happens.
    if !mount_namespace() {
        eprintln!("no private mount namespace here: not checked");
        return;
    }
    let st = scratch("proc-sys");
    for f in [
        "/proc/sys/net/ipv4/conf/lo/accept_local",
        "/sys/class/net/lo/tx_queue_len",
    ] {
        let (code, out, err) = script_beside(
            &st,
            "sysctl.sh",
            &format!("v=$(cat {f})\necho \"$v\" > {f}\necho \"write: $?\"\n"),
        );
        assert_eq!(code, Some(0), "{f}: {err}");
        assert!(out.contains("write: 1"), "{f}: the write failed: {out}");
        assert!(err.contains("Read-only file system"), "{f}: {err}");
    }
}
