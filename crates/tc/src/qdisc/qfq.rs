//! `qfq` (iproute2's `q_qfq.c`): no qdisc options; a class has a weight and a maximum packet size.

use super::{ClassLang, QdiscLang};
use crate::util::{get_u32, matches};
use crate::{Failure, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::qdisc::qfq::QfqClassOptions;
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "qfq",
    words: &["weight", "maxpkt"],
    parse,
    // QFQ dumps no TCA_OPTIONS: tc prints nothing.
    print: |_, _, _, _| {},
    xstats: None,
    xstats_json: None,
    class: Some(ClassLang {
        parse: parse_class,
        print: print_class,
        // The kernel sends `struct tc_qfq_stats`; tc 6.1 has no printer for it.
        print_xstats: |_, _| {},
    }),
};

const USAGE: &str = "Usage: ... qfq";
const CLASS_USAGE: &str = "Usage: ... qfq weight NUMBER maxpkt BYTES";

/// `qfq_parse_opt` (tc 6.1): any word is refused, `help` (or its prefix) with the usage alone.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    match args.first() {
        None => Ok(QdiscOptions::Qfq),
        Some(a) if matches(a, "help") => Err(Failure::options(USAGE)),
        Some(a) => Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
    }
}

/// `qfq_parse_class_opt` (tc 6.1): `weight` and `maxpkt` (prefixes allowed), decimal `__u32`s the
/// kernel checks; repeated, the last one counts.
fn parse_class(args: &[String], _excl: bool) -> Result<ClassOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = QfqClassOptions::default();
    while let Some(a) = it.next() {
        let slot = if matches(a, "weight") {
            (&mut o.weight, "weight")
        } else if matches(a, "maxpkt") {
            (&mut o.lmax, "maxpkt")
        } else if a == "help" {
            return Err(Failure::options(CLASS_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{a}\"?\n{CLASS_USAGE}")));
        };
        let v = it.value()?;
        *slot.0 = Some(
            get_u32(v, 10).ok_or_else(|| Failure::options(format!("Illegal \"{}\"", slot.1)))?,
        );
    }
    Ok(ClassOptions::Qfq(o))
}

/// `qfq_print_opt` (serving classes).
fn print_class(c: &ClassInfo, _flags: ShowFlags, s: &mut String) {
    if let Some(ClassOptions::Qfq(o)) = &c.options {
        if let Some(w) = o.weight {
            let _ = write!(s, "weight {w} ");
        }
        if let Some(l) = o.lmax {
            let _ = write!(s, "maxpkt {l} ");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn class_words() {
        assert_eq!(
            parse_class(&words("w 10 maxp 2000 weight 20"), true).unwrap(),
            ClassOptions::Qfq(QfqClassOptions {
                weight: Some(20),
                lmax: Some(2000)
            })
        );
        // tc sends what it can read; the kernel judges the range.
        assert!(parse_class(&words("weight 0"), true).is_ok());
        let e = parse_class(&words("weight -1"), true).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (1, "Illegal \"weight\""));
        assert_eq!(parse_class(&words("maxpkt"), true).unwrap_err().code, 255);
        assert!(parse_class(&words("quantum 1"), true)
            .unwrap_err()
            .msg
            .starts_with("What is \"quantum\"?"));
        assert_eq!(parse("qfq", &words("he"), None).unwrap_err().msg, USAGE);
        assert_eq!(parse("qfq", &[], None).unwrap(), QdiscOptions::Qfq);
    }
}
