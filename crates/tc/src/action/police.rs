//! `police` (`m_police.c`): a token bucket on bytes and/or packets with conform and exceed controls;
//! its action and old filter forms; and its printers.

use super::*;

pub(super) const POLICE_USAGE: &str = "Usage: ... police [ rate BPS burst BYTES[/BYTES] ] \n\t\t[ pkts_rate RATE pkts_burst PACKETS ] [ mtu BYTES[/BYTES] ]\n\t\t[ peakrate BPS ] [ avrate BPS ] [ overhead BYTES ]\n\t\t[ linklayer TYPE ] [ CONTROL ]\nWhere: CONTROL := conform-exceed <EXCEEDACT>[/NOTEXCEEDACT]\n\t\t  Define how to handle packets which exceed (<EXCEEDACT>)\n\t\t  or conform (<NOTEXCEEDACT>) the configured bandwidth limit.\n       EXCEEDACT/NOTEXCEEDACT := { pipe | ok | reclassify | drop | continue |\n\t\t\t\t   goto chain <CHAIN_INDEX> }";

/// `parse_action_control_slash`: `EXCEED[/CONFORM]`, or `EXCEED / CONFORM` as three words.
pub(super) fn parse_control_slash(c: &mut Cur) -> Result<(Control, Option<Control>)> {
    let w = c.peek().unwrap_or("");
    if let Some((a, b)) = w.split_once('/') {
        let r1 = action_a2n(a, true).ok_or_else(|| bad(""))?;
        let r2 = action_a2n(b, true).ok_or_else(|| bad(""))?;
        c.fwd();
        return Ok((r1, Some(r2)));
    }
    let r1 = parse_control(c, true, false)?.ok_or_else(|| bad(""))?;
    if c.peek() == Some("/") {
        c.next_arg()?;
        let r2 = parse_control(c, true, false)?.ok_or_else(|| bad(""))?;
        return Ok((r1, Some(r2)));
    }
    Ok((r1, None))
}

/// `act_parse_police`. `named`: the cursor is at the word `police` (the action form).
pub fn parse_police(c: &mut Cur, named: bool) -> Result<(ActionParams, u32)> {
    if named {
        c.next_arg()?;
    }
    let mut p = PoliceParams::default();
    let mut index = 0u32;
    let (mut buffer, mut mtu, mut mpu) = (0u32, 0u32, 0u32);
    let (mut rate, mut prate, mut avrate) = (0u64, 0u64, 0u64);
    let (mut pps, mut ppsburst) = (0u64, 0u64);
    let mut overhead = 0u16;
    let mut ll = LinkLayer::Ethernet;
    let mut rcell: Option<u8> = None;
    let mut presult: Option<Control> = None;
    let mut ok = 0;
    while let Some(w) = c.peek() {
        if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| invarg("index", v))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            let v = c.next_arg()?;
            if buffer != 0 {
                return Err(duparg("buffer/burst", v));
            }
            let (b, cell) = get_size_and_cell(v).ok_or_else(|| invarg("buffer", v))?;
            buffer = b;
            rcell = cell;
        } else if w == "mtu" || w == "minburst" {
            let v = c.next_arg()?;
            if mtu != 0 {
                return Err(duparg("mtu/minburst", v));
            }
            mtu = get_size_and_cell(v).ok_or_else(|| invarg("mtu", v))?.0;
        } else if w == "mpu" {
            let v = c.next_arg()?;
            if mpu != 0 {
                return Err(duparg("mpu", v));
            }
            mpu = get_size(v).ok_or_else(|| invarg("mpu", v))?;
        } else if w == "rate" {
            let v = c.next_arg()?;
            if rate != 0 {
                return Err(duparg("rate", v));
            }
            rate = get_rate(v).ok_or_else(|| invarg("rate", v))?;
        } else if w == "avrate" {
            let v = c.next_arg()?;
            if avrate != 0 {
                return Err(duparg("avrate", v));
            }
            avrate = get_rate(v)
                .filter(|r| *r <= u32::MAX as u64)
                .ok_or_else(|| invarg("avrate", v))?;
        } else if matches(w, "peakrate") {
            let v = c.next_arg()?;
            if prate != 0 {
                return Err(duparg("peakrate", v));
            }
            prate = get_rate(v).ok_or_else(|| invarg("peakrate", v))?;
        } else if [
            "reclassify",
            "drop",
            "shot",
            "continue",
            "pass",
            "ok",
            "pipe",
            "goto",
        ]
        .iter()
        .any(|k| matches(w, k))
        {
            p.action = parse_control(c, false, false)?.ok_or_else(|| bad(""))?;
            ok += 1;
            continue;
        } else if w == "conform-exceed" {
            c.next_arg()?;
            let (e, r) = parse_control_slash(c)?;
            p.action = e;
            if let Some(r) = r {
                presult = Some(r);
            }
            ok += 1;
            continue;
        } else if matches(w, "overhead") {
            let v = c.next_arg()?;
            overhead = get_u16(v, 10).ok_or_else(|| invarg("overhead", v))?;
        } else if matches(w, "linklayer") {
            let v = c.next_arg()?;
            ll = if matches(v, "ethernet") {
                LinkLayer::Ethernet
            } else if matches(v, "atm") || matches(v, "adsl") {
                LinkLayer::Atm
            } else {
                return Err(invarg("linklayer", v));
            };
        } else if matches(w, "pkts_rate") {
            let v = c.next_arg()?;
            if pps != 0 {
                return Err(duparg("pkts_rate", v));
            }
            pps = v.parse().map_err(|_| invarg("pkts_rate", v))?;
        } else if matches(w, "pkts_burst") {
            let v = c.next_arg()?;
            if ppsburst != 0 {
                return Err(duparg("pkts_burst", v));
            }
            ppsburst = v.parse().map_err(|_| invarg("pkts_burst", v))?;
        } else if w == "help" {
            return Err(Failure::syntax(POLICE_USAGE));
        } else {
            break;
        }
        c.fwd();
        ok += 1;
    }
    if ok == 0 {
        return Err(bad(""));
    }
    if rate != 0 && avrate != 0 {
        return Err(bad(""));
    }
    if rate == 0 && avrate == 0 && index == 0 && mtu == 0 && pps == 0 {
        return Err(bad(
            "'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.",
        ));
    }
    if rate != 0 && buffer == 0 && avrate == 0 {
        return Err(bad("'burst' requires 'rate'."));
    }
    if pps != 0 && ppsburst == 0 {
        return Err(bad("'pkts_burst' requires 'pkts_rate'."));
    }
    if pps != 0 && rate != 0 {
        return Err(bad(
            "'rate' and 'pkts_rate' are not allowed in same action.",
        ));
    }
    if prate != 0 {
        if rate == 0 {
            return Err(bad("'peakrate' requires 'rate'."));
        }
        if mtu == 0 {
            return Err(bad("'mtu' is required, if 'peakrate' is requested."));
        }
    }
    let spec = |r: u64| RateSpec {
        rate: r,
        overhead,
        mpu: mpu.min(u16::MAX as u32) as u16,
        linklayer: ll,
    };
    if rate != 0 {
        p.rate = Some(spec(rate));
        p.burst = calc_xmittime(rate, buffer);
    }
    // The kernel keeps `255 << cell_log` when no mtu was given (tc_calc_rtable's cell for 2047 bytes).
    p.mtu = if mtu != 0 {
        mtu
    } else if rate != 0 {
        let cell = rcell.unwrap_or_else(|| {
            let mut l = 0u8;
            while (2047u32 >> l) > 255 {
                l += 1;
            }
            l
        });
        255u32 << cell
    } else {
        u32::MAX
    };
    if prate != 0 {
        p.peakrate = Some(spec(prate));
    }
    p.avrate = avrate as u32;
    if let Some(r) = presult {
        p.result = r;
    }
    if pps != 0 {
        p.pkt_rate = Some(pps);
        p.pkt_burst = calc_xmittime(pps, ppsburst.min(u32::MAX as u64) as u32) as u64;
    }
    Ok((ActionParams::Police(p), index))
}

/// `tc_print_police` for the old `police` form inside a filter (u32, fw, basic, flow): the kernel
/// dumps it with the action's own dump (tcf_action_dump_old), times included, and tc 6.1 prints it
/// with the same print_police, so it reads as the action form does.
pub fn print_police_compat(p: &mut Printer, a: &Action, flags: ShowFlags, now: u64) {
    if let ActionParams::Police(pp) = &a.params {
        print(p, a, pp, flags, now);
    }
}

/// `print_police`: ` police 0x1 rate … burst … mtu … action … overhead …`, then the `ref` line and,
/// under `-s`, the times (TCA_POLICE_TM, which tcf_police_dump puts in both forms).
pub(super) fn print(p: &mut Printer, a: &Action, pp: &PoliceParams, flags: ShowFlags, now: u64) {
    p.json_string("kind", "police");
    let rate = pp.rate.map_or(0, |r| r.rate);
    p.fp(format_args!(" police {:#x} ", a.index));
    p.json_number("index", a.index);
    p.fp(format_args!(
        "rate {} burst {} mtu {} ",
        sprint_rate(rate),
        sprint_size(calc_xmitsize(rate, pp.burst)),
        sprint_size(pp.mtu)
    ));
    if flags.raw {
        p.fp(format_args!("[{:08x}] ", pp.burst));
    }
    if let Some(pr) = pp.peakrate {
        p.fp(format_args!("peakrate {} ", sprint_rate(pr.rate)));
    }
    if pp.avrate != 0 {
        p.fp(format_args!("avrate {} ", sprint_rate(pp.avrate as u64)));
    }
    if let Some(pps) = pp.pkt_rate {
        let burst = calc_xmitsize(pps, pp.pkt_burst.min(u32::MAX as u64) as u32);
        p.number("pkts_rate", format_args!("pkts_rate {pps} "), pps);
        p.number("pkts_burst", format_args!("pkts_burst {burst} "), burst);
    }
    print_control(p, "action ", pp.action, "");
    if pp.result != TC_ACT_OK {
        print_control(p, "/", pp.result, " ");
    } else {
        p.fp(" ");
    }
    let spec = pp.rate.unwrap_or_default();
    p.number(
        "overhead",
        format_args!("overhead {} ", sprint_size(spec.overhead as u32)),
        spec.overhead,
    );
    if spec.linklayer == LinkLayer::Atm || flags.details {
        let ll = spec.linklayer.name();
        p.string("linklayer", format_args!("linklayer {ll} "), ll);
    }
    p.nl();
    p.number("ref", format_args!("\tref {} ", a.refcnt), a.refcnt);
    p.number("bind", format_args!("bind {} ", a.bindcnt), a.bindcnt);
    if flags.stats {
        print_tm(p, a, now);
    }
    p.nl();
}
