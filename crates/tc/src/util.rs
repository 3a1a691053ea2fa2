//! iproute2's number words: parsing (`get_rate`, `get_size`, `get_time`, handles) and printing
//! (`sprint_rate`, `sprint_size`, `sprint_time`), with the rounding of the tc 6.1 this machine ships, so
//! that `tclab tc … show` prints what `tc … show` prints.

/// C's `strtod` prefix: the longest leading decimal float, and the rest.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start || (i == digits_start + 1 && b[digits_start] == b'.') {
        return None;
    }
    // exponent
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let e0 = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > e0 {
            i = j;
        }
    }
    Some((s[..i].parse().ok()?, &s[i..]))
}

/// `get_rate64`: bits per second by default; `kbit`, `mbit`, `bps` (bytes), `kibit`… case-insensitive.
/// Returns bytes per second.
pub fn get_rate(s: &str) -> Option<u64> {
    let bps = bytes_per_sec(s)?;
    if !bps.is_finite() || bps >= u64::MAX as f64 {
        return None;
    }
    Some(bps as u64)
}

/// A rate's bytes per second, unrounded (`strtod` times the unit's scale, over 8).
fn bytes_per_sec(s: &str) -> Option<f64> {
    let (n, unit) = split_number(s)?;
    if n < 0.0 {
        return None;
    }
    const UNITS: &[(&str, f64)] = &[
        ("bit", 1.),
        ("kibit", 1024.),
        ("kbit", 1000.),
        ("mibit", 1048576.),
        ("mbit", 1e6),
        ("gibit", 1073741824.),
        ("gbit", 1e9),
        ("tibit", 1099511627776.),
        ("tbit", 1e12),
        ("bps", 8.),
        ("kibps", 8. * 1024.),
        ("kbps", 8000.),
        ("mibps", 8. * 1048576.),
        ("mbps", 8e6),
        ("gibps", 8. * 1073741824.),
        ("gbps", 8e9),
        ("tibps", 8. * 1099511627776.),
        ("tbps", 8e12),
    ];
    let scale = if unit.is_empty() {
        1.0
    } else {
        UNITS.iter().find(|(u, _)| u.eq_ignore_ascii_case(unit))?.1
    };
    Some(n * scale / 8.0)
}

/// `get_rate` (tc's 32-bit one, for attributes of 32 bits): as [`get_rate`], but the bytes per second
/// must be a whole number that fits 32 bits (`1001bit`, 125.125 bytes/s, is refused).
pub fn get_rate32(s: &str) -> Option<u32> {
    let bps = bytes_per_sec(s)?;
    (bps.floor() == bps && bps <= u32::MAX as f64).then_some(bps as u32)
}

/// `get_size`: bytes; `k`/`kb` = 1024, `m`/`mb`, `g`/`gb`, `kbit`, `mbit`, `gbit`, `b`. Must fit 32 bits.
pub fn get_size(s: &str) -> Option<u32> {
    let (n, unit) = split_number(s)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1048576.0,
        "g" | "gb" => 1073741824.0,
        "kbit" => 1024.0 / 8.0,
        "mbit" => 1048576.0 / 8.0,
        "gbit" => 1073741824.0 / 8.0,
        _ => return None,
    };
    let sz = n * mult;
    if !(0.0..=u32::MAX as f64).contains(&sz) || sz.floor() != sz as u32 as f64 {
        return None;
    }
    Some(sz as u32)
}

/// `get_size_and_cell`: `SIZE[/CELL]`, the cell a power of two.
pub fn get_size_and_cell(s: &str) -> Option<(u32, Option<u8>)> {
    match s.split_once('/') {
        None => Some((get_size(s)?, None)),
        Some((sz, cell)) => {
            let size = get_size(sz)?;
            let cell: i64 = parse_c_integer(cell)?;
            (0..32)
                .find(|i| 1i64 << i == cell)
                .map(|i| (size, Some(i as u8)))
        }
    }
}

/// `get_time`: microseconds; `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`, bare = µs.
pub fn get_time(s: &str) -> Option<u32> {
    let (n, unit) = split_number(s)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "us" | "usec" | "usecs" => 1.0,
        "ms" | "msec" | "msecs" => 1e3,
        "s" | "sec" | "secs" => 1e6,
        _ => return None,
    };
    Some(c_double_to_uint(n * mult))
}

/// C's `unsigned int u = d` as gcc builds it on x86-64, whose tc is the reference: through a signed
/// 64-bit conversion (`cvttsd2si`), keeping the low 32 bits. So `latency 5000s` (5e9 µs) is 705 s and
/// `-1ms` is 2^32 - 1000 µs, as tc 6.1 gives them the kernel; a value outside i64's range, or NaN,
/// converts to i64::MIN, whose low bits are 0.
pub fn c_double_to_uint(d: f64) -> u32 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-TWO_63..TWO_63).contains(&d) {
        return 0;
    }
    d as i64 as u32
}

/// `strtol`/`strtoul` with base 0 (`0x` hex, leading `0` octal), whole string.
pub fn parse_c_integer(s: &str) -> Option<i64> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `get_u32(…, base)`; base 0 autodetects.
pub fn get_u32(s: &str, base: u32) -> Option<u32> {
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let v = if base == 0 {
        parse_c_integer(s)?
    } else {
        i64::from_str_radix(
            s.strip_prefix("0x").filter(|_| base == 16).unwrap_or(s),
            base,
        )
        .ok()?
    };
    u32::try_from(v).ok()
}

pub fn get_u16(s: &str, base: u32) -> Option<u16> {
    get_u32(s, base).and_then(|v| u16::try_from(v).ok())
}

/// C's `strtoul(s, &end, base)` for base 0, 8, 10 or 16: leading white space, an optional sign, `0x` (base
/// 16 or 0) and `0` (base 0) prefixes; saturates at `ULONG_MAX` on overflow; a minus negates the result
/// modulo 2⁶⁴. Returns the value (`None` when no digit was read, as `end == s`) and the rest.
pub fn strtoul(s: &str, base: u32) -> (Option<u64>, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = b.get(i) == Some(&b'-');
    if neg || b.get(i) == Some(&b'+') {
        i += 1;
    }
    let hex_prefix =
        b.len() > i + 2 && b[i] == b'0' && b[i + 1] | 0x20 == b'x' && b[i + 2].is_ascii_hexdigit();
    let radix = match base {
        16 | 0 if hex_prefix => {
            i += 2;
            16
        }
        0 if b.get(i) == Some(&b'0') => 8,
        0 => 10,
        b => b,
    };
    let start = i;
    // C's strtoul saturates at ULONG_MAX on overflow.
    let mut v = Some(0u64);
    while let Some(d) = b.get(i).and_then(|&c| (c as char).to_digit(radix)) {
        v = v.and_then(|v| v.checked_mul(radix as u64)?.checked_add(d as u64));
        i += 1;
    }
    if i == start {
        return (None, s);
    }
    let v = v.unwrap_or(u64::MAX);
    (Some(if neg { v.wrapping_neg() } else { v }), &s[i..])
}

/// `get_addr_ipv4`: one to four dot-separated parts, each read by `strtoul(…, 0)` (so `0x0a` and `012` are
/// octets too) and at most 255; missing parts are 0 (`80` is 80.0.0.0).
pub fn get_addr_ipv4(s: &str) -> Option<u32> {
    let mut octets = [0u8; 4];
    let mut rest = s;
    for (i, octet) in octets.iter_mut().enumerate() {
        let (n, after) = strtoul(rest, 0);
        let n = n.filter(|n| *n <= 255)?;
        *octet = n as u8;
        if after.is_empty() {
            return Some(u32::from_be_bytes(octets));
        }
        if i == 3 {
            return None;
        }
        rest = after.strip_prefix('.')?;
    }
    None
}

/// `ll_addr_a2n(lladdr, 6, arg)` for an Ethernet address: a dotted IPv4 address (its 4 bytes), or up to six
/// colon-separated parts each read by `sscanf("%x")` (leading blanks, `0x`, trailing junk ignored) and at
/// most 255. Bytes the text does not reach are 0. Returns the bytes and how many the text gave; the error
/// is tc's line (`"ARG" is invalid lladdr.`).
pub fn ll_addr_a2n(s: &str) -> std::result::Result<([u8; 6], usize), String> {
    let bad = |part: &str| format!("\"{part}\" is invalid lladdr.\n");
    let mut out = [0u8; 6];
    if s.contains('.') {
        let a = get_addr_ipv4(s).ok_or_else(|| bad(s))?;
        out[..4].copy_from_slice(&a.to_be_bytes());
        return Ok((out, 4));
    }
    let mut rest = s;
    let mut n = 0;
    for b in out.iter_mut() {
        let (part, next) = match rest.split_once(':') {
            Some((p, n)) => (p, Some(n)),
            None => (rest, None),
        };
        let t = part.trim_start();
        let neg = t.starts_with('-');
        let t = t.strip_prefix(['-', '+']).unwrap_or(t);
        let t = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit()))
            .unwrap_or(t);
        let digits = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
        if digits == 0 {
            return Err(bad(part));
        }
        match u64::from_str_radix(&t[..digits.min(16)], 16) {
            Ok(v) if v <= 255 && (!neg || v == 0) => *b = v as u8,
            _ => return Err(bad(part)),
        }
        n += 1;
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    Ok((out, n))
}

/// `get_unsigned(…, 0)`: a whole word read by `strtoul(…, 0)`, at most `UINT_MAX`.
pub fn get_unsigned(s: &str) -> Option<u32> {
    match strtoul(s, 0) {
        (Some(v), "") if !s.trim_start().starts_with('-') || v == 0 => u32::try_from(v).ok(),
        _ => None,
    }
}

/// `get_prefix_1(…, AF_INET)`: `any`/`all`/`default` (prefix length 0), or `ADDR[/LEN]` where ADDR is read
/// by [`get_addr_ipv4`] and LEN is a number ≤ 32 or a dotted netmask (`get_netmask`). Returns the address
/// and the prefix length.
pub fn get_prefix_ipv4(s: &str) -> Option<(u32, u32)> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    if a == "default" || a == "all" || a == "any" {
        // `bitlen == -2`: no prefix length may follow.
        return len.is_none().then_some((0, 0));
    }
    if a.contains(':') {
        return None;
    }
    let addr = get_addr_ipv4(a)?;
    let bits = match len {
        None => 32,
        Some(l) => match get_unsigned(l) {
            Some(n) => n,
            None => {
                // A dotted netmask: its ones must be contiguous.
                let mask = get_addr_ipv4(l).filter(|_| !l.contains(':'))?;
                let host = !mask;
                if host & host.wrapping_add(1) != 0 {
                    return None;
                }
                mask.count_ones()
            }
        },
    };
    (bits <= 32).then_some((addr, bits))
}

/// `get_qdisc_handle`: `MAJ:` or `MAJ` (hex, `0x` allowed as `strtoul` allows it), or `none`.
pub fn get_qdisc_handle(s: &str) -> Option<u32> {
    if s == "none" {
        return Some(0);
    }
    let (maj, rest) = strtoul(s, 16);
    // `maj` is a `__u32` in tc: strtoul's result is truncated before the range check.
    let maj = maj? as u32;
    if maj >= 1 << 16 || !(rest.is_empty() || rest.starts_with(':')) {
        return None;
    }
    Some(maj << 16)
}

/// `get_tc_classid`: `MAJ:MIN` (hex), `:MIN`, `MAJ:`, a raw hex number, `root`, `none`; `0x` prefixes on
/// either part, as `strtoul(…, 16)` reads them (`7FFF:0x1`, `0x3`).
pub fn get_tc_classid(s: &str) -> Option<u32> {
    if s == "root" {
        return Some(0xffff_ffff);
    }
    if s == "none" {
        return Some(0);
    }
    let (maj, rest) = strtoul(s, 16);
    // A `__u32` holding `strtoul`'s result: the low 32 bits (`98765fedcb` is 765f:edcb).
    let maj = match maj {
        Some(m) => m as u32,
        None if rest.starts_with(':') => 0,
        None => return None,
    };
    if let Some(minor) = rest.strip_prefix(':') {
        if maj >= 1 << 16 {
            return None;
        }
        let (min, rest2) = strtoul(minor, 16);
        let min = min.unwrap_or(0) as u32;
        if !rest2.is_empty() || min >= 1 << 16 {
            return None;
        }
        Some((maj << 16) | min)
    } else if rest.is_empty() {
        Some(maj)
    } else {
        None
    }
}

/// iproute2's `matches(arg, word)`: `arg` is a non-empty prefix of `word`.
pub fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.starts_with(arg)
}

/// C's `%g` with `precision` significant digits.
pub fn fmt_g(v: f64, precision: usize) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        format!(
            "{}e{}{:02}",
            strip(mant),
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    } else {
        strip(&format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, v))
    }
}

/// `sprint_rate` (bytes/s in, bits/s out): `180Kbit`, `1500Kbit`, `100Mbit`.
pub fn sprint_rate(bytes_per_sec: u64) -> String {
    let mut s = String::new();
    push_rate(&mut s, bytes_per_sec);
    s
}

/// [`sprint_rate`] appended to `out`.
pub fn push_rate(out: &mut String, bytes_per_sec: u64) {
    let mut rate = bytes_per_sec.wrapping_shl(3);
    let units = ["", "K", "M", "G", "T"];
    let mut i = 0;
    while i < units.len() - 1 {
        if rate < 1000 || (!rate.is_multiple_of(1000) && rate < 1_000_000) {
            break;
        }
        rate /= 1000;
        i += 1;
    }
    push_u64(out, rate);
    out.push_str(units[i]);
    out.push_str("bit");
}

/// `sprint_size`: `1600b`, `2Kb`, `10Kb`, `1Mb`.
pub fn sprint_size(sz: u32) -> String {
    let mut s = String::new();
    push_size(&mut s, sz);
    s
}

/// [`sprint_size`] appended to `out`.
pub fn push_size(out: &mut String, sz: u32) {
    let t = sz as f64;
    let (kilo, mega) = (1024.0, 1048576.0);
    if t >= mega && (mega * (t / mega).round_ties_even() - t).abs() < 1024.0 {
        out.push_str(&fmt_g((t / mega).round_ties_even(), 6));
        out.push_str("Mb");
    } else if t >= kilo && (kilo * (t / kilo).round_ties_even() - t).abs() < 16.0 {
        out.push_str(&fmt_g((t / kilo).round_ties_even(), 6));
        out.push_str("Kb");
    } else {
        push_u64(out, sz as u64);
        out.push('b');
    }
}

/// `v` in decimal appended to `out`: what `write!(out, "{v}")` writes, without the formatting
/// machinery's cost per argument (a `tc -s class show` of 10 000 HTB classes prints 150 000 numbers).
pub fn push_u64(out: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // ASCII digits, pushed one by one: cheaper than checking them as UTF-8 for `push_str`.
    digits[i..].iter().for_each(|&d| out.push(d as char));
}

/// A signed `v` in decimal appended to `out`, as `write!(out, "{v}")` writes it.
pub fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

/// `v` in lower-case hexadecimal appended to `out` (`{:x}`).
pub fn push_hex(out: &mut String, mut v: u32) {
    let mut digits = [0u8; 8];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    digits[i..].iter().for_each(|&d| out.push(d as char));
}

/// A handle appended to `out` as its `Display` writes it (`1:10`, `1:`, `root`).
pub fn push_handle(out: &mut String, h: tclab_core::Handle) {
    use tclab_core::Handle;
    match h {
        Handle::ROOT | Handle::INGRESS | Handle::UNSPEC => {
            let _ = std::fmt::Write::write_fmt(out, format_args!("{h}"));
        }
        h => {
            push_hex(out, h.major() as u32);
            out.push(':');
            if h.minor() != 0 {
                push_hex(out, h.minor() as u32);
            }
        }
    }
}

/// `sprint_time` (µs in): `%.3gs`, `%.3gms` or `%uus`.
pub fn sprint_time(us: u32) -> String {
    let t = us as f64;
    if t >= 1e6 {
        format!("{}s", fmt_g(t / 1e6, 3))
    } else if t >= 1e3 {
        format!("{}ms", fmt_g(t / 1e3, 3))
    } else {
        format!("{us}us")
    }
}

/// tc's psched clock as read from `/proc/net/psched` on a high-resolution kernel: 15.625 ticks per µs.
pub const TICKS_PER_USEC: f64 = 15.625;

/// `tc_calc_xmittime` (tc 6.1): the time to send `size` bytes at `rate`, in ticks, truncated to whole
/// microseconds first as that tc does. Both steps store a double in an `unsigned int`
/// ([`c_double_to_uint`]), so a time past 32 bits wraps: `htb rate 8bit` (1 byte/s) and its 1600-byte
/// buffer are 2.5e10 ticks, given the kernel as 3 525 163 520 and shown as `burst 225b`.
pub fn calc_xmittime(rate: u64, size: u32) -> u32 {
    let us = c_double_to_uint(1e6 * (size as f64 / rate as f64));
    c_double_to_uint(us as f64 * TICKS_PER_USEC)
}

/// `tc_calc_xmitsize` (tc 6.1): bytes sent in `ticks` at `rate`.
pub fn calc_xmitsize(rate: u64, ticks: u32) -> u32 {
    let us = (ticks as f64 / TICKS_PER_USEC) as u32;
    (rate as f64 * us as f64 / 1e6).min(u32::MAX as f64) as u32
}

/// `tc_core_tick2time`: ticks to µs, truncated.
pub fn tick2time(ticks: u32) -> u32 {
    (ticks as f64 / TICKS_PER_USEC) as u32
}

/// C's `get_integer` (an `int`, any base when 0).
pub fn get_int(s: &str) -> Option<i32> {
    let v = crate::util::parse_c_integer(s)?;
    i32::try_from(v).ok()
}

/// `sscanf("%lg")`: the longest prefix that reads as a number.
pub fn scan_double(s: &str) -> Option<f64> {
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok())
}

/// `get_time64`: nanoseconds; `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`,
/// `ns`/`nsec`/`nsecs`, bare = ns. The double is truncated to an `s64` as C converts it.
pub fn get_time64(s: &str) -> Option<i64> {
    let (n, unit) = split_number(s)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" | "nsecs" => 1.0,
        "us" | "usec" | "usecs" => 1e3,
        "ms" | "msec" | "msecs" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        _ => return None,
    };
    Some((n * mult) as i64)
}

/// `sprint_time64` (ns in): `%.3gs`, `%.3gms`, `%.3gus` or `%lldns`.
pub fn sprint_time64(ns: i64) -> String {
    let t = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{}s", fmt_g(t / 1e9, 3))
    } else if ns >= 1_000_000 {
        format!("{}ms", fmt_g(t / 1e6, 3))
    } else if ns >= 1_000 {
        format!("{}us", fmt_g(t / 1e3, 3))
    } else {
        format!("{ns}ns")
    }
}

/// `parse_percent`: `30%` or `30` → 0.30; `None` out of [0, 100] % or with another suffix.
pub fn parse_percent(s: &str) -> Option<f64> {
    let (v, rest) = split_number(s).unwrap_or((0.0, s));
    let v = v / 100.0;
    if !(0.0..=1.0).contains(&v) {
        return None;
    }
    if !rest.is_empty() && rest != "%" {
        return None;
    }
    Some(v)
}

/// `get_s32` (any base when 0): an `int`, the whole word.
pub fn get_s32(s: &str) -> Option<i32> {
    get_int(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_time_converts_to_32_bits_as_tc_does() {
        // Values tc 6.1 gave the kernel (read back from `tc qdisc show` of a tbf's latency).
        assert_eq!(get_time("5000s"), Some(705_032_704));
        assert_eq!(get_time("-1ms"), Some(u32::MAX - 999));
        assert_eq!(get_time("4294967296us"), Some(0));
        assert_eq!(get_time("1e30s"), Some(0));
        assert_eq!(get_time("4294967295us"), Some(u32::MAX));
        assert_eq!(get_time("1.5ms"), Some(1500));
        assert_eq!(get_time("5 s"), None);
    }

    #[test]
    fn numbers_and_handles_append_as_format_writes_them() {
        // The listings' fast paths must print exactly what `{}`, `{:x}` and Handle's Display print.
        for v in [
            0u64,
            7,
            9,
            10,
            99,
            100,
            1_000_000,
            4_294_967_295,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut s = String::from("x");
            push_u64(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
        for v in [0i64, -1, 1, -200_000, 200_000, i64::MIN, i64::MAX] {
            let mut s = String::new();
            push_i64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        for v in [0u32, 9, 10, 0xf, 0x10, 0xabcd, 0x8000_0000, u32::MAX] {
            let mut s = String::new();
            push_hex(&mut s, v);
            assert_eq!(s, format!("{v:x}"));
        }
        use tclab_core::Handle;
        for h in [
            Handle::ROOT,
            Handle::INGRESS,
            Handle::UNSPEC,
            Handle::new(1, 0),
            Handle::new(1, 0x10),
            Handle::new(0xffff, 0xffff),
            Handle::new(0x8001, 0),
            Handle::new(0, 5),
        ] {
            let mut s = String::new();
            push_handle(&mut s, h);
            assert_eq!(s, h.to_string());
        }
    }

    #[test]
    fn rates_parse_and_print_like_tc() {
        assert_eq!(get_rate("180kbit"), Some(22_500));
        assert_eq!(
            get_rate("10000"),
            Some(1250),
            "a bare number is bits per second"
        );
        assert_eq!(get_rate("1kbps"), Some(1000), "bps means bytes");
        assert_eq!(get_rate("2Mbit"), Some(250_000), "case-insensitive");
        assert_eq!(get_rate("fast"), None);
        assert_eq!(sprint_rate(22_500), "180Kbit");
        assert_eq!(sprint_rate(187_500), "1500Kbit");
        assert_eq!(sprint_rate(12_500_000), "100Mbit");
        assert_eq!(sprint_rate(154_320), "1234Kbit");
    }

    #[test]
    fn sizes_parse_and_print_like_tc() {
        assert_eq!(get_size("10k"), Some(10_240));
        assert_eq!(get_size("1540"), Some(1540));
        assert_eq!(get_size("3000b"), Some(3000));
        assert_eq!(
            get_size("159900000000000000"),
            None,
            "seed 000's burst does not fit tc's 32 bits"
        );
        assert_eq!(get_size("foo-bar"), None);
        assert_eq!(sprint_size(1599), "1599b");
        assert_eq!(sprint_size(2048), "2Kb");
        assert_eq!(sprint_size(10_240), "10Kb");
        assert_eq!(sprint_size(1_514_000), "1514000b");
    }

    #[test]
    fn burst_round_trip_matches_the_kernel_here() {
        // Observed on this machine (tc 6.1, kernel 6.x): 180kbit, burst 1600 → buffer 0x10f445 → "1599b".
        assert_eq!(calc_xmittime(22_500, 1600), 0x10f445);
        assert_eq!(calc_xmitsize(22_500, 0x10f445), 1599);
        assert_eq!(calc_xmittime(1000, 1600), 25_000_000);
        // 1600 bytes at 1 byte/s: 1.6e9 µs, 2.5e10 ticks, past 32 bits: wrapped as tc 6.1 wraps it.
        assert_eq!(calc_xmittime(1, 1600), 3_525_163_520);
    }

    #[test]
    fn handles_parse_like_tc() {
        assert_eq!(get_qdisc_handle("1:"), Some(0x10000));
        assert_eq!(get_qdisc_handle("ffff:"), Some(0xffff0000));
        assert_eq!(get_qdisc_handle("10000:"), None);
        assert_eq!(get_qdisc_handle("123^"), None);
        assert_eq!(get_tc_classid("1:10"), Some(0x10010));
        assert_eq!(get_tc_classid("1:"), Some(0x10000));
        assert_eq!(get_tc_classid(":20"), Some(0x20));
        assert_eq!(get_tc_classid("root"), Some(0xffffffff));
        assert_eq!(get_tc_classid("1:x"), None);
    }

    #[test]
    fn percent_g_like_c() {
        assert_eq!(fmt_g(50.0, 3), "50");
        assert_eq!(fmt_g(20.5, 3), "20.5");
        assert_eq!(fmt_g(1.23456, 3), "1.23");
        assert_eq!(fmt_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(sprint_time(50_000), "50ms");
        assert_eq!(sprint_time(100), "100us");
    }
}
