//! Where each object of a policy came from: the script line (or batch line, or store record) of the
//! command that last made it what it is, so that a finding can name the line to edit.
//!
//! The engine keeps no such thing (the kernel does not either); the loader hands `check` every journal
//! record with the line of the call that added it, and this index reads the records' words as tc reads
//! its generic options (`dev`, `parent`, `handle`, `classid`, `pref`, `protocol`…, up to the kind).
//! The last record that names an object wins: a `class change` after a `class add` is what set the
//! class's rate.

use crate::util::{get_qdisc_handle, get_tc_classid, matches};
use std::collections::HashMap;
use tclab_core::Handle;

/// A journal record (`tc …`, `iptables …`, `link …`) and where it came from (`FILE:LINE`).
#[derive(Clone, Debug)]
pub struct Record {
    pub at: String,
    pub entry: Vec<String>,
}

/// What a tc command line says before its kind's own words.
#[derive(Clone, Debug, Default)]
pub struct TcLine<'a> {
    /// `qdisc`, `class`, `filter` (written out, whatever the abbreviation).
    pub object: &'static str,
    /// The command as written: `add`, `replace`, `change`, `del`…
    pub cmd: &'a str,
    pub dev: Option<&'a str>,
    pub parent: Option<u32>,
    pub handle: Option<&'a str>,
    pub classid: Option<u32>,
    pub pref: Option<u32>,
    pub protocol: Option<&'a str>,
    /// The kind (`htb`, `u32`…) and the words after it.
    pub kind: Option<&'a str>,
    pub rest: &'a [String],
}

impl<'a> TcLine<'a> {
    /// Read a journal record's tc words (`["tc", "qdisc", "add", …]`); `None` for other records.
    pub fn parse(entry: &'a [String]) -> Option<TcLine<'a>> {
        if entry.first().map(String::as_str) != Some("tc") {
            return None;
        }
        let words: &[String] = &entry[1..];
        let start = words.iter().position(|w| !w.starts_with('-'))?;
        let words = &words[start..];
        let obj = words.first()?.as_str();
        let object = if matches(obj, "qdisc") {
            "qdisc"
        } else if matches(obj, "class") {
            "class"
        } else if matches(obj, "filter") {
            "filter"
        } else {
            return None;
        };
        let mut line = TcLine {
            object,
            cmd: words.get(1).map_or("", String::as_str),
            ..TcLine::default()
        };
        let mut i = 2;
        while i < words.len() {
            let w = words[i].as_str();
            let next = words.get(i + 1).map(String::as_str);
            match w {
                "dev" => line.dev = next,
                "parent" => line.parent = next.and_then(get_tc_classid),
                "handle" => line.handle = next,
                "classid" if object == "class" => line.classid = next.and_then(get_tc_classid),
                "pref" | "prio" | "priority" if object == "filter" => {
                    line.pref = next.and_then(|p| crate::util::get_u32(p, 0))
                }
                "protocol" | "proto" if object == "filter" => line.protocol = next,
                "chain" | "block" | "ingress_block" | "egress_block" => {}
                "root" => {
                    line.parent = Some(Handle::ROOT.0);
                    i += 1;
                    continue;
                }
                "ingress" | "clsact" if object == "qdisc" => {
                    line.parent = Some(Handle::ROOT.0);
                    line.handle = Some("ffff:");
                    line.kind = Some(w);
                    i += 1;
                    continue;
                }
                "ingress" | "egress" => {
                    // `tc filter add dev X ingress`: clsact's ingress or egress hook.
                    line.parent = Some(if w == "ingress" {
                        0xffff_fff2
                    } else {
                        0xffff_fff3
                    });
                    i += 1;
                    continue;
                }
                "estimator" => {
                    i += 3;
                    continue;
                }
                "stab" => {
                    i += 1;
                    while i + 1 < words.len()
                        && ["mtu", "tsize", "mpu", "overhead", "linklayer"]
                            .contains(&words[i].as_str())
                    {
                        i += 2;
                    }
                    continue;
                }
                _ => {
                    line.kind = Some(w);
                    line.rest = &words[i + 1..];
                    break;
                }
            }
            i += 2;
        }
        Some(line)
    }

    /// The class a filter line names (`flowid` or `classid` among its kind's words).
    pub fn flowid(&self) -> Option<u32> {
        let i = self
            .rest
            .iter()
            .position(|w| w == "flowid" || w == "classid")?;
        get_tc_classid(self.rest.get(i + 1)?)
    }

    /// The handle this line gives its qdisc (`ingress` and `clsact` are `ffff:`).
    pub fn qdisc_handle(&self) -> Option<u32> {
        self.handle.and_then(get_qdisc_handle)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A qdisc by its handle, or (for a line without one) by its parent.
    Qdisc(String, u32),
    QdiscAt(String, u32),
    Class(String, u32),
    /// A filter instance by its parent and preference; or the parent's last filter line.
    Filter(String, u32, u32),
    FilterAt(String, u32),
    /// The last `link add|set` of a device that made it up or down, or created it.
    Link(String),
}

/// The index: each object's last record.
#[derive(Default)]
pub struct Origins {
    pub records: Vec<Record>,
    index: HashMap<Key, usize>,
}

impl Origins {
    pub fn new(records: Vec<Record>) -> Origins {
        let mut index = HashMap::new();
        for (n, r) in records.iter().enumerate() {
            for k in keys(&r.entry) {
                index.insert(k, n);
            }
        }
        Origins { records, index }
    }

    fn get(&self, k: Key) -> Option<&Record> {
        self.index.get(&k).map(|&n| &self.records[n])
    }

    /// The line of the qdisc `handle` (whose parent is `parent`) on `dev`.
    pub fn qdisc(&self, dev: &str, handle: Handle, parent: Handle) -> Option<&str> {
        self.qdisc_record(dev, handle, parent)
            .map(|r| r.at.as_str())
    }

    /// The record itself, for its words.
    pub fn qdisc_record(&self, dev: &str, handle: Handle, parent: Handle) -> Option<&Record> {
        self.get(Key::Qdisc(dev.into(), handle.0))
            .or_else(|| self.get(Key::QdiscAt(dev.into(), parent.0)))
    }

    pub fn class(&self, dev: &str, classid: Handle) -> Option<&str> {
        self.class_record(dev, classid).map(|r| r.at.as_str())
    }

    /// The record itself, for its words (the parent it was added under).
    pub fn class_record(&self, dev: &str, classid: Handle) -> Option<&Record> {
        self.get(Key::Class(dev.into(), classid.0))
    }

    /// The line of the filter at `parent` with preference `pref` (or, unknown, the parent's last one).
    pub fn filter(&self, dev: &str, parent: Handle, pref: Option<u32>) -> Option<&Record> {
        pref.and_then(|p| self.get(Key::Filter(dev.into(), parent.0, p)))
            .or_else(|| self.get(Key::FilterAt(dev.into(), parent.0)))
    }

    /// The line that last created a device or set it up or down.
    pub fn link(&self, dev: &str) -> Option<&str> {
        self.link_record(dev).map(|r| r.at.as_str())
    }

    pub fn link_record(&self, dev: &str) -> Option<&Record> {
        self.get(Key::Link(dev.into()))
    }

    /// The tc filter lines, in order, with where each came from.
    pub fn filter_lines(&self) -> impl Iterator<Item = (&Record, TcLine<'_>)> {
        self.records.iter().filter_map(|r| {
            TcLine::parse(&r.entry)
                .filter(|l| l.object == "filter" && is_adding(l.cmd))
                .map(|l| (r, l))
        })
    }
}

/// `add`, `replace`, `change`, `link` (tc's prefixes of them): a line that makes or changes an object.
fn is_adding(cmd: &str) -> bool {
    ["add", "replace", "change", "link"]
        .iter()
        .any(|c| matches(cmd, c))
        && cmd != "del"
}

/// The device a `link add|set|del` record names: after `dev` or `name`, else its first word that is
/// not an option (`ip link add ifb0 type ifb`, `ip link set ifb0 up`).
pub fn link_device(entry: &[String]) -> Option<&str> {
    let words = entry.get(2..)?;
    let after = |k: &str| {
        words
            .iter()
            .position(|w| w == k)
            .and_then(|p| words.get(p + 1))
    };
    after("dev")
        .or_else(|| after("name"))
        .or_else(|| {
            words
                .first()
                .filter(|w| !["link", "type"].contains(&w.as_str()))
        })
        .map(String::as_str)
}

fn keys(entry: &[String]) -> Vec<Key> {
    if entry.first().map(String::as_str) == Some("link") {
        let makes = entry
            .get(1)
            .is_some_and(|c| c == "add" || entry.iter().any(|w| w == "up" || w == "down"));
        return match link_device(entry) {
            Some(d) if makes => vec![Key::Link(d.to_string())],
            _ => Vec::new(),
        };
    }
    let Some(l) = TcLine::parse(entry) else {
        return Vec::new();
    };
    let Some(dev) = l.dev.map(str::to_string) else {
        return Vec::new();
    };
    if !is_adding(l.cmd) {
        return Vec::new();
    }
    match l.object {
        "qdisc" => match (l.qdisc_handle(), l.parent) {
            (Some(h), _) if h != 0 => vec![Key::Qdisc(dev, h)],
            (_, Some(p)) => vec![Key::QdiscAt(dev, p)],
            _ => Vec::new(),
        },
        "class" => l
            .classid
            .map(|c| vec![Key::Class(dev, c)])
            .unwrap_or_default(),
        _ => {
            let parent = l.parent.unwrap_or(Handle::ROOT.0);
            let mut k = vec![Key::FilterAt(dev.clone(), parent)];
            if let Some(p) = l.pref {
                k.push(Key::Filter(dev, parent, p));
            }
            k
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at: &str, line: &str) -> Record {
        Record {
            at: at.into(),
            entry: line.split_whitespace().map(String::from).collect(),
        }
    }

    #[test]
    fn the_last_line_naming_an_object_is_its_origin() {
        let o = Origins::new(vec![
            rec(
                "a.sh:3",
                "tc qdisc add dev eth0 root handle 1: htb default 20",
            ),
            rec(
                "a.sh:4",
                "tc class add dev eth0 parent 1: classid 1:20 htb rate 1mbit",
            ),
            rec(
                "a.sh:5",
                "tc -s class change dev eth0 classid 0x1:0x20 htb rate 2mbit",
            ),
            rec("a.sh:6", "tc qdisc add dev eth0 parent 1:20 fq_codel"),
            rec(
                "a.sh:7",
                "tc qdisc add dev eth0 stab overhead 40 linklayer atm handle ffff: ingress",
            ),
            rec(
                "a.sh:8",
                "tc filter add dev eth0 parent ffff: protocol ip prio 5 u32 match u32 0 0",
            ),
            rec("a.sh:9", "link set dev ifb0 up"),
            rec("a.sh:10", "link add ifb1 type ifb"),
        ]);
        assert_eq!(
            o.qdisc("eth0", Handle(0x10000), Handle::ROOT),
            Some("a.sh:3")
        );
        assert_eq!(o.class("eth0", Handle(0x10020)), Some("a.sh:5"));
        // A qdisc without a handle is found by its parent.
        assert_eq!(
            o.qdisc("eth0", Handle(0x80010000), Handle(0x10020)),
            Some("a.sh:6")
        );
        assert_eq!(
            o.qdisc("eth0", Handle(0xffff0000), Handle::ROOT),
            Some("a.sh:7")
        );
        let f = o.filter("eth0", Handle(0xffff0000), Some(5)).unwrap();
        assert_eq!(f.at, "a.sh:8");
        assert_eq!(o.link("ifb0"), Some("a.sh:9"));
        assert_eq!(o.link("ifb1"), Some("a.sh:10"));
        assert_eq!(o.class("eth1", Handle(0x10020)), None);
        let (_, l) = o.filter_lines().next().unwrap();
        assert_eq!(
            (l.kind, l.protocol, l.pref),
            (Some("u32"), Some("ip"), Some(5))
        );
    }
}
