//! `tclab lab bench`: how fast the live bridge forwards, beside the kernel's bridge between the same
//! namespaces in the same run. iperf3 sends UDP as fast as it can from node-2 to node-1, once with
//! 64-byte frames (packets per second) and once with 1514-byte frames (bit rate), through (a) tclab live
//! without a policy, (b) tclab live with an HTB of 1 000 classes, (c) the kernel's bridge, (d) the
//! kernel's bridge with the same HTB. The figure is what the receiver got: iperf3 itself may be the
//! limit (it is one sender thread), which the kernel's row shows.

use crate::args::{usage, CmdResult};
use std::path::Path;
use std::process::{Command, Stdio};
use tclab_live::lab::{Lab, Shaper};

/// An HTB of `n` leaf classes under one 10 Gbit/s class, traffic to the first leaf by default.
fn htb_classes(n: u32) -> String {
    let mut s = String::from(
        "#!/bin/sh\ntc qdisc add dev eth0 root handle 1: htb default 2\n\
         tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit\n",
    );
    for i in 2..n + 2 {
        s.push_str(&format!(
            "tc class add dev eth0 parent 1:1 classid 1:{i:x} htb rate 10mbit ceil 10gbit\n"
        ));
    }
    s
}

/// (packets per second, bits per second of frames) the receiver got from one iperf3 UDP run.
fn udp_rate(lab: &Lab, payload: u32, secs: u32) -> Result<(f64, f64), String> {
    let ns = |n: &str| lab.ns(n);
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("node-1"),
            "iperf3",
            "-s",
            "-1",
            "-p",
            "5299",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3: {e}"))?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = Command::new("timeout")
        .arg((secs + 20).to_string())
        .args([
            "ip",
            "netns",
            "exec",
            &ns("node-2"),
            "iperf3",
            "-c",
            "10.0.1.1",
            "-p",
            "5299",
            "-u",
            "-b",
            "0",
        ])
        .args(["-l", &payload.to_string(), "-t", &secs.to_string(), "-J"])
        .output()
        .map_err(|e| format!("iperf3: {e}"))?;
    let _ = server.kill();
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "iperf3's output: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let sum = &v["end"]["sum"];
    let packets =
        sum["packets"].as_f64().unwrap_or(0.0) - sum["lost_packets"].as_f64().unwrap_or(0.0);
    let seconds = sum["seconds"]
        .as_f64()
        .filter(|s| *s > 0.0)
        .ok_or("iperf3 ran no time")?;
    let pps = packets / seconds;
    // A frame: payload + UDP 8 + IPv4 20 + Ethernet 14.
    Ok((pps, pps * (payload + 42) as f64 * 8.0))
}

pub fn run(exe: &Path, lab: &Lab, secs: u32) -> CmdResult {
    Lab::check_root().map_err(usage)?;
    if secs == 0 {
        return Err(usage("--secs must be at least 1"));
    }
    let dir = std::env::temp_dir().join(format!("tclab-labbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let htb = dir.join("htb1000.sh");
    std::fs::write(&htb, htb_classes(1000)).map_err(|e| e.to_string())?;
    let cases: [(&str, Shaper); 4] = [
        (
            "tclab live, no policy",
            Shaper::Tclab {
                exe,
                policy: None,
                out: None,
            },
        ),
        (
            "tclab live, HTB 1 000 classes",
            Shaper::Tclab {
                exe,
                policy: Some(&htb),
                out: None,
            },
        ),
        ("kernel bridge, no policy", Shaper::Kernel { policy: None }),
        (
            "kernel bridge, HTB 1 000 classes",
            Shaper::Kernel { policy: Some(&htb) },
        ),
    ];
    println!("UDP node-2 -> node-1 through the router, iperf3 -b 0 for {secs} s each (one sender thread)");
    println!(
        "{:<34} {:>14} {:>16}",
        "router", "64 B frames", "1514 B frames"
    );
    let mut rows = Vec::new();
    for (name, shaper) in cases {
        lab.up(shaper)?;
        let small = udp_rate(lab, 22, secs);
        let large = udp_rate(lab, 1472, secs);
        let _ = lab.down();
        let (small, large) = (small?, large?);
        println!(
            "{name:<34} {:>10.0} pps {:>10.3} Gbit/s",
            small.0,
            large.1 / 1e9
        );
        rows.push((small.0, large.1));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "tclab / kernel: {:.2} of the packet rate and {:.2} of the bit rate without a policy; {:.2} and {:.2} with HTB",
        rows[0].0 / rows[2].0,
        rows[0].1 / rows[2].1,
        rows[1].0 / rows[3].0,
        rows[1].1 / rows[3].1
    );
    Ok(0)
}
