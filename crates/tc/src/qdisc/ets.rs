//! `ets` (iproute2's `q_ets.c`): bands, strict bands, quanta and the priomap; a class's quantum.

use super::{ClassLang, QdiscLang};
use crate::util::get_u32;
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::ets::{EtsClassOptions, EtsOptions, MAX_BANDS};
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "ets",
    words: &["bands", "strict", "quanta", "priomap", "quantum"],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: Some(ClassLang {
        parse: parse_class,
        print: print_class,
        // ETS dumps no class xstats.
        print_xstats: |_, _| {},
    }),
};

const USAGE: &str =
    "Usage: ... ets [bands NUMBER] [strict NUMBER] [quanta Q1 Q2...] [priomap P1 P2...]";
const CLASS_USAGE: &str = "Usage: ... ets [quantum Q1]";
/// `TC_PRIO_MAX`.
const TC_PRIO_MAX: usize = 15;

/// `parse_quantum`: a decimal `get_unsigned`, not 0.
fn quantum(arg: &str) -> Result<u32> {
    match get_u32(arg, 10) {
        None => Err(Failure::options("Illegal \"quanta\" element")),
        Some(0) => Err(Failure::options("\"quanta\" must be > 0")),
        Some(q) => Ok(q),
    }
}

/// `parse_nbands`.
fn nbands(arg: &str, what: &str) -> Result<u8> {
    let n = get_u32(arg, 10).ok_or_else(|| Failure::options(format!("Illegal \"{what}\"")))?;
    if n > MAX_BANDS as u32 {
        return Err(Failure::options(format!(
            "The number of \"{what}\" must be <= {MAX_BANDS}"
        )));
    }
    Ok(n as u8)
}

/// `ets_parse_opt` (tc 6.1). After `quanta` or `priomap` the following bare numbers are its elements
/// until another keyword. Without `bands` the count is the strict bands plus the quanta (a `__u8`,
/// as tc adds them); the kernel checks what tc does not.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    #[derive(PartialEq)]
    enum Mode {
        Words,
        Quanta,
        Priomap,
    }
    let mut it = crate::Cur::new(args);
    let mut o = EtsOptions::default();
    let mut mode = Mode::Words;
    while let Some(a) = it.next() {
        let dup = |what: &str| Failure::options(format!("Duplicate \"{what}\""));
        match a {
            "bands" => {
                if o.nbands != 0 {
                    return Err(dup(a));
                }
                o.nbands = nbands(it.value()?, a)?;
                mode = Mode::Words;
            }
            "strict" => {
                if o.nstrict != 0 {
                    return Err(dup(a));
                }
                o.nstrict = nbands(it.value()?, a)?;
                mode = Mode::Words;
            }
            "quanta" => {
                if !o.quanta.is_empty() {
                    return Err(dup(a));
                }
                o.quanta.push(quantum(it.value()?)?);
                mode = Mode::Quanta;
            }
            "priomap" => {
                if !o.priomap.is_empty() {
                    return Err(dup(a));
                }
                mode = Mode::Priomap;
                let v = it.value()?;
                priomap_element(&mut o, v)?;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ if mode == Mode::Quanta => o.quanta.push(quantum(a)?),
            _ if mode == Mode::Priomap => priomap_element(&mut o, a)?,
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    if o.nbands == 0 {
        o.nbands = (o.quanta.len() + o.nstrict as usize) as u8;
    }
    if o.nbands == 0 {
        return Err(Failure::options(format!(
            "One of \"bands\", \"quanta\" or \"strict\" needs to be specified\n{USAGE}"
        )));
    }
    if o.nstrict as usize + o.quanta.len() > o.nbands as usize {
        return Err(Failure::options(format!(
            "Not enough total bands to cover all the strict bands and quanta\n{USAGE}"
        )));
    }
    if o.priomap.iter().any(|&b| b >= o.nbands) {
        return Err(Failure::options("\"priomap\" element is out of bounds"));
    }
    Ok(QdiscOptions::Ets(o))
}

/// One `priomap` element: a decimal unsigned stored in a `__u8` (tc truncates; the bounds check
/// after the loop sees the truncated value).
fn priomap_element(o: &mut EtsOptions, arg: &str) -> Result<()> {
    let band = get_u32(arg, 10).ok_or_else(|| Failure::options("Illegal \"priomap\" element"))?;
    if o.priomap.len() > TC_PRIO_MAX {
        return Err(Failure::options(format!(
            "\"priomap\" index cannot be higher than {TC_PRIO_MAX}"
        )));
    }
    o.priomap.push(band as u8);
    Ok(())
}

/// `ets_parse_copt` (tc 6.1).
fn parse_class(args: &[String], _excl: bool) -> Result<ClassOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = EtsClassOptions::default();
    while let Some(a) = it.next() {
        match a {
            "quantum" => {
                if o.quantum.is_some() {
                    return Err(Failure::options("Duplicate \"quantum\""));
                }
                o.quantum = Some(quantum(it.value()?)?);
            }
            "help" => return Err(Failure::options(CLASS_USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{CLASS_USAGE}"))),
        }
    }
    Ok(ClassOptions::Ets(o))
}

/// `ets_print_opt`: `bands N [strict S ][quanta Q… ]priomap P… `.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Ets(o) = o else { return };
    let _ = write!(s, "bands {} ", o.nbands);
    j.insert("bands".into(), json!(o.nbands));
    if o.nstrict != 0 {
        let _ = write!(s, "strict {} ", o.nstrict);
        j.insert("strict".into(), json!(o.nstrict));
    }
    if !o.quanta.is_empty() {
        s.push_str("quanta");
        for q in &o.quanta {
            let _ = write!(s, " {q}");
        }
        s.push(' ');
        j.insert("quanta".into(), json!(o.quanta));
    }
    s.push_str("priomap");
    for p in &o.priomap {
        let _ = write!(s, " {p}");
    }
    s.push(' ');
    j.insert("priomap".into(), json!(o.priomap));
}

/// `ets_print_copt`: a sharing band's quantum; nothing for a strict band.
fn print_class(c: &ClassInfo, _flags: ShowFlags, s: &mut String) {
    if let Some(ClassOptions::Ets(EtsClassOptions { quantum: Some(q) })) = &c.options {
        let _ = write!(s, "quantum {q} ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Result<QdiscOptions> {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        parse("ets", &args, None)
    }

    fn ets(nbands: u8, nstrict: u8, quanta: &[u32], priomap: &[u8]) -> QdiscOptions {
        QdiscOptions::Ets(EtsOptions {
            nbands,
            nstrict,
            quanta: quanta.to_vec(),
            priomap: priomap.to_vec(),
        })
    }

    #[test]
    fn what_tc_sends() {
        assert_eq!(
            p("strict 3 quanta 1500 750").unwrap(),
            ets(5, 3, &[1500, 750], &[])
        );
        assert_eq!(
            p("quanta 10 20 bands 4 priomap 1 0").unwrap(),
            ets(4, 0, &[10, 20], &[1, 0])
        );
        // 17 quanta: tc counts 17 bands and lets the kernel refuse them.
        let q17: Vec<String> = (1..=17).map(|i| i.to_string()).collect();
        assert_eq!(p(&format!("quanta {}", q17.join(" "))).unwrap(), {
            let q: Vec<u32> = (1..=17).collect();
            ets(17, 0, &q, &[])
        });
    }

    #[test]
    fn what_tc_refuses() {
        for (line, msg) in [
            (
                "",
                "One of \"bands\", \"quanta\" or \"strict\" needs to be specified",
            ),
            ("bands 17", "The number of \"bands\" must be <= 16"),
            ("strict x", "Illegal \"strict\""),
            ("quanta 1000 0", "\"quanta\" must be > 0"),
            ("quanta -1", "Illegal \"quanta\" element"),
            ("bands 2 quanta 1 2 3", "Not enough total bands"),
            (
                "bands 2 priomap 0 1 2",
                "\"priomap\" element is out of bounds",
            ),
            ("bands 2 bands 2", "Duplicate \"bands\""),
            (
                "priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 bands 2",
                "\"priomap\" index cannot be higher than 15",
            ),
            ("foo", "What is \"foo\"?"),
        ] {
            let e = p(line).unwrap_err();
            assert_eq!(e.code, 1, "{line}");
            assert!(e.msg.starts_with(msg), "{line}: {}", e.msg);
        }
        assert_eq!(p("quanta").unwrap_err().code, 255);
    }
}
