//! The per-packet decision trace (`tclab sim SCENARIO --trace FILE`): every enqueue on an egress qdisc
//! (with its verdict), every dequeue (with the packet's sojourn in the tree), every drop (with its reason,
//! as the engine names it: tail drop, overlimit, AQM, action…) and every packet an ingress action dropped,
//! one record each, streamed to a file as the run goes, in virtual-time order. Same scenario and seed,
//! same trace, byte for byte. `tclab trace stats|show|plot|export` read it back ([`Reader`]).
//!
//! # The text form (version 2)
//!
//! What `tclab trace show` prints, and what `--trace -` writes to stdout: one line per record.
//!
//! ```text
//! # tclab trace 2
//! # flow download tcp 32768-32771
//! # time_ns dev event flow len class reason sojourn_ns filter
//! 1000523040 router:eth1 enq download 1514 1:20 ok - u32:1
//! 1000523040 router:eth1 deq download 1514 1:20 - 0 -
//! 1201000000 router:eth1 drop download 1514 1:20 tail_drop - -
//! ```
//!
//! `flow` is the traffic entry a packet belongs to (by its source port, or ICMP identifier), with `<` for
//! the reverse direction (a TCP download's ACKs: `download<`), `-` if none. `class` is the leaf class the
//! innermost classful qdisc (HTB, HFSC, CBQ, DRR, QFQ, PRIO, ETS) queued it in (`-` under a classless
//! root). `reason` is the enqueue's verdict (`ok`, `cn`, `drop`,
//! `stolen`) or the drop's reason; `sojourn_ns` the time since the packet entered the root qdisc, for
//! dequeues and for queued packets dropped later; `filter`, on enqueue lines, the filter instance that
//! classified the packet last on its way down (`kind:pref`, `@chain` outside chain 0; `-` if none did:
//! a default class, skb->priority, a classless root). Version 1 traces (without `filter`) are read too.
//!
//! # The binary form (version 3)
//!
//! What `--trace FILE` writes: the same records, about a twenty-sixth of the text's size (docs/TRACES.md
//! has the figures). Records go in blocks of up to [`BLOCK_RECORDS`], each block's fields stored column by
//! column (times as differences, strings as numbers) and compressed with deflate; the writer holds one
//! block at a time, and so does the reader. Integers are LEB128 varints (7 bits a byte, low first)
//! unless said otherwise.
//!
//! ```text
//! file   = magic version frame* end
//! magic  = 89 74 63 6c 61 62 74 72          ("\x89tclabtr": no text trace starts with 0x89)
//! version = 03                              (one byte; text traces are versions 1 and 2)
//! frame  = kind:u8 packed_len:u32le raw_len:u32le packed:[u8; packed_len]
//!          packed is a zlib stream (RFC 1950: deflate with an Adler-32 check) of raw_len bytes
//! kind   'H' (once, first): raw is the text header's `# flow NAME PROTO PORTS` lines
//!        'B' (a block):     raw is described below
//!        'E' (once, last):  raw is varint(records in the file); nothing follows it
//! block  = varint(n) varint(k) string*k column*9
//! string = varint(byte length) UTF-8 bytes  (k strings that this block uses first; they take the
//!          next numbers of the file's string table, which starts empty and only grows)
//! column = n values, in this order of columns:
//!          time_ns     zigzag varint: the difference from the record before (the file's first: from 0)
//!          event       one byte: 0 enq, 1 deq, 2 drop, 3 rxdrop
//!          dev         varint string number
//!          flow        varint string number
//!          len         varint
//!          class       varint string number
//!          reason      varint string number
//!          sojourn_ns  varint: sojourn + 1, or 0 for `-`
//!          filter      varint string number
//! ```
//!
//! A file without its 'E' frame is a run that stopped early: its whole blocks are read, with a warning.
//! A frame that does not inflate, or whose contents disagree with this description, is an error.
//! `tclab trace export FILE` writes the records as CSV, for pandas and polars.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use tclab_core::qdisc::{DropReason, Verdict};
use tclab_core::{Nanos, Packet};

pub const HEADER: &str = "# time_ns dev event flow len class reason sojourn_ns filter";
/// The first bytes of a binary trace, before its version byte.
pub const MAGIC: &[u8; 8] = b"\x89tclabtr";
/// The binary form's version.
pub const VERSION: u8 = 3;
/// Records per block: about 700 KB of columns before compression, 120 KB after (rrul-100mbit-fq_codel).
pub const BLOCK_RECORDS: usize = 1 << 16;
/// Deflate's level: on rrul-100mbit-fq_codel's trace, level 3 packs a third smaller than level 1 and
/// within 4 % of level 6, in less than a third of level 6's time (docs/TRACES.md).
const LEVEL: u8 = 3;
/// No frame is larger than this: a longer length is a corrupt file, not a reason to allocate.
const MAX_FRAME: u32 = 64 << 20;

/// A trace being written.
pub struct Trace {
    sink: Sink,
    /// (IP protocol, source port or ICMP identifier) → index in `flow_names`.
    flows: BTreeMap<(u8, u16), usize>,
    flow_names: Vec<String>,
    /// The first write error, reported when the run ends.
    pub error: Option<std::io::Error>,
    pub lines: u64,
}

enum Sink {
    Text(Box<dyn Write>),
    Binary(Box<Blocks>),
}

/// What happened to a packet.
pub enum Event {
    /// Queued (or refused) by the root qdisc, and the filter that classified it last, if any.
    Enqueue(Verdict, Option<tclab_core::filter::FilterMatch>),
    Dequeue,
    /// Dropped by a qdisc: the reason, and whether it was the arriving packet.
    Drop(DropReason, bool),
    /// Dropped by an ingress action.
    RxDrop,
}

/// The kind of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ev {
    Enq,
    Deq,
    Drop,
    RxDrop,
}

impl Ev {
    pub const ALL: [Ev; 4] = [Ev::Enq, Ev::Deq, Ev::Drop, Ev::RxDrop];

    pub fn name(self) -> &'static str {
        match self {
            Ev::Enq => "enq",
            Ev::Deq => "deq",
            Ev::Drop => "drop",
            Ev::RxDrop => "rxdrop",
        }
    }

    pub fn parse(s: &str) -> Option<Ev> {
        Ev::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// Which traffic entry a packet belongs to.
#[derive(Clone, Copy)]
enum FlowOf {
    None,
    Forward(usize),
    Reverse(usize),
}

/// One record's fields as the run knows them, before either form spells them.
struct Fields<'a> {
    time: Nanos,
    dev: &'a str,
    event: Ev,
    flow: FlowOf,
    len: u32,
    class: u32,
    reason: &'static str,
    sojourn: Option<Nanos>,
    filter: Option<tclab_core::filter::FilterMatch>,
}

impl Trace {
    /// A binary trace (version 3) into `out`. Its header is written by [`Trace::begin`], once the traffic
    /// is known.
    pub fn new(out: Box<dyn Write>) -> Trace {
        Trace::with(Sink::Binary(Box::new(Blocks::new(out))))
    }

    /// A text trace (version 2) into `out`: for `--trace -`, read by eye or by grep.
    pub fn text(out: Box<dyn Write>) -> Trace {
        Trace::with(Sink::Text(out))
    }

    fn with(sink: Sink) -> Trace {
        Trace {
            sink,
            flows: BTreeMap::new(),
            flow_names: Vec::new(),
            error: None,
            lines: 0,
        }
    }

    /// Write the header: each traffic entry's name, protocol (6, 17, 1) and source ports (or ICMP
    /// identifiers), by which packets are told apart.
    pub fn begin(&mut self, flows: &[(String, u8, Vec<u16>)]) {
        let mut head = String::new();
        for (name, proto, ports) in flows {
            let kind = match proto {
                6 => "tcp",
                17 => "udp",
                _ => "icmp",
            };
            let range = match (ports.first(), ports.last()) {
                (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
                (Some(a), _) => a.to_string(),
                _ => "-".into(),
            };
            head.push_str(&format!("# flow {name} {kind} {range}\n"));
            for &p in ports {
                self.flows.insert((*proto, p), self.flow_names.len());
            }
            self.flow_names.push(name.clone());
        }
        let r = match &mut self.sink {
            Sink::Text(out) => {
                out.write_all(format!("# tclab trace 2\n{head}{HEADER}\n").as_bytes())
            }
            Sink::Binary(b) => b.begin(&head),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    /// The traffic entry of a packet, and its direction.
    fn flow_of(&self, pkt: &Packet) -> FlowOf {
        let d = &pkt.data;
        if d.len() < 20 || d[0] >> 4 != 4 {
            return FlowOf::None;
        }
        let ihl = (d[0] & 0x0f) as usize * 4;
        let proto = d[9];
        let word = |at: usize| d.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        match proto {
            6 | 17 => {
                let (Some(sport), Some(dport)) = (word(ihl), word(ihl + 2)) else {
                    return FlowOf::None;
                };
                if let Some(&n) = self.flows.get(&(proto, sport)) {
                    FlowOf::Forward(n)
                } else if let Some(&n) = self.flows.get(&(proto, dport)) {
                    FlowOf::Reverse(n)
                } else {
                    FlowOf::None
                }
            }
            1 => match (d.get(ihl), word(ihl + 4)) {
                (Some(&kind), Some(id)) => match self.flows.get(&(1, id)) {
                    Some(&n) if kind == 0 => FlowOf::Reverse(n),
                    Some(&n) => FlowOf::Forward(n),
                    None => FlowOf::None,
                },
                _ => FlowOf::None,
            },
            _ => FlowOf::None,
        }
    }

    pub fn record(&mut self, now: Nanos, dev: &str, ev: Event, pkt: &Packet) {
        if self.error.is_some() {
            return;
        }
        let sojourn = now.saturating_sub(pkt.enqueue_ns);
        let (event, reason, sojourn, filter) = match ev {
            Event::Enqueue(v, m) => (
                Ev::Enq,
                match v {
                    Verdict::Success => "ok",
                    Verdict::Cn => "cn",
                    Verdict::Drop => "drop",
                    Verdict::Stolen => "stolen",
                    Verdict::Bypass => "bypass",
                },
                None,
                m,
            ),
            Event::Dequeue => (Ev::Deq, "-", Some(sojourn), None),
            Event::Drop(r, arriving) => (Ev::Drop, r.name(), (!arriving).then_some(sojourn), None),
            Event::RxDrop => (Ev::RxDrop, DropReason::Action.name(), None, None),
        };
        let f = Fields {
            time: now,
            dev,
            event,
            flow: self.flow_of(pkt),
            len: pkt.wire_len().unwrap_or(pkt.len),
            class: pkt.leaf_class,
            reason,
            sojourn,
            filter,
        };
        let r = match &mut self.sink {
            Sink::Text(out) => {
                let flow = match f.flow {
                    FlowOf::None => "-".to_string(),
                    FlowOf::Forward(n) => self.flow_names[n].clone(),
                    FlowOf::Reverse(n) => format!("{}<", self.flow_names[n]),
                };
                let line = format!(
                    "{} {} {} {flow} {} {} {} {} {}\n",
                    f.time,
                    f.dev,
                    f.event.name(),
                    f.len,
                    class_name(f.class),
                    f.reason,
                    f.sojourn.map_or("-".to_string(), |s| s.to_string()),
                    f.filter.map_or("-".to_string(), |m| m.to_string()),
                );
                out.write_all(line.as_bytes())
            }
            Sink::Binary(b) => b.push(&f, &self.flow_names),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
        self.lines += 1;
    }

    pub fn finish(&mut self) -> Result<u64, String> {
        if let Some(e) = self.error.take() {
            return Err(format!("the trace could not be written: {e}"));
        }
        match &mut self.sink {
            Sink::Text(out) => out.flush(),
            Sink::Binary(b) => b.finish(),
        }
        .map_err(|e| format!("the trace could not be written: {e}"))?;
        Ok(self.lines)
    }
}

fn class_name(leaf: u32) -> String {
    if leaf == 0 {
        "-".to_string()
    } else {
        tclab_core::Handle(leaf).to_string()
    }
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

/// The binary form's writer: the block being filled, column by column, and the string table so far.
struct Blocks {
    out: Box<dyn Write>,
    /// String → its number in the file's table (looked up, never iterated).
    ids: BTreeMap<String, u32>,
    /// Numbers already found for the fields that repeat most, without spelling them again.
    class_ids: BTreeMap<u32, u32>,
    flow_ids: BTreeMap<(usize, bool), u32>,
    filter_ids: BTreeMap<(&'static str, u32, u32), u32>,
    reason_ids: BTreeMap<&'static str, u32>,
    /// The strings this block introduces, encoded, and how many.
    new_strings: Vec<u8>,
    new_count: u64,
    /// time, event, dev, flow, len, class, reason, sojourn, filter.
    cols: [Vec<u8>; 9],
    n: usize,
    prev_time: Nanos,
    total: u64,
    raw: Vec<u8>,
}

impl Blocks {
    fn new(out: Box<dyn Write>) -> Blocks {
        Blocks {
            out,
            ids: BTreeMap::new(),
            class_ids: BTreeMap::new(),
            flow_ids: BTreeMap::new(),
            filter_ids: BTreeMap::new(),
            reason_ids: BTreeMap::new(),
            new_strings: Vec::new(),
            new_count: 0,
            cols: Default::default(),
            n: 0,
            prev_time: 0,
            total: 0,
            raw: Vec::new(),
        }
    }

    fn begin(&mut self, head: &str) -> std::io::Result<()> {
        self.out.write_all(MAGIC)?;
        self.out.write_all(&[VERSION])?;
        self.frame(b'H', head.as_bytes())
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(s.to_string(), id);
        put_varint(&mut self.new_strings, s.len() as u64);
        self.new_strings.extend_from_slice(s.as_bytes());
        self.new_count += 1;
        id
    }

    fn push(&mut self, f: &Fields, flow_names: &[String]) -> std::io::Result<()> {
        let dev = self.intern(f.dev);
        let flow = match f.flow {
            FlowOf::None => self.intern("-"),
            FlowOf::Forward(n) | FlowOf::Reverse(n) => {
                let rev = matches!(f.flow, FlowOf::Reverse(_));
                match self.flow_ids.get(&(n, rev)) {
                    Some(&id) => id,
                    None => {
                        let name = if rev {
                            format!("{}<", flow_names[n])
                        } else {
                            flow_names[n].clone()
                        };
                        let id = self.intern(&name);
                        self.flow_ids.insert((n, rev), id);
                        id
                    }
                }
            }
        };
        let class = match self.class_ids.get(&f.class) {
            Some(&id) => id,
            None => {
                let id = self.intern(&class_name(f.class));
                self.class_ids.insert(f.class, id);
                id
            }
        };
        let reason = match self.reason_ids.get(f.reason) {
            Some(&id) => id,
            None => {
                let id = self.intern(f.reason);
                self.reason_ids.insert(f.reason, id);
                id
            }
        };
        let filter = match f.filter {
            None => self.intern("-"),
            Some(m) => match self.filter_ids.get(&(m.kind, m.chain, m.pref)) {
                Some(&id) => id,
                None => {
                    let id = self.intern(&m.to_string());
                    self.filter_ids.insert((m.kind, m.chain, m.pref), id);
                    id
                }
            },
        };
        let c = &mut self.cols;
        put_varint(
            &mut c[0],
            zigzag(f.time.wrapping_sub(self.prev_time) as i64),
        );
        self.prev_time = f.time;
        c[1].push(f.event as u8);
        put_varint(&mut c[2], dev.into());
        put_varint(&mut c[3], flow.into());
        put_varint(&mut c[4], f.len.into());
        put_varint(&mut c[5], class.into());
        put_varint(&mut c[6], reason.into());
        put_varint(&mut c[7], f.sojourn.map_or(0, |s| s.saturating_add(1)));
        put_varint(&mut c[8], filter.into());
        self.n += 1;
        if self.n == BLOCK_RECORDS {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> std::io::Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        put_varint(&mut raw, self.n as u64);
        put_varint(&mut raw, self.new_count);
        raw.extend_from_slice(&self.new_strings);
        for c in &mut self.cols {
            raw.extend_from_slice(c);
            c.clear();
        }
        self.total += self.n as u64;
        self.n = 0;
        self.new_strings.clear();
        self.new_count = 0;
        let r = self.frame(b'B', &raw);
        self.raw = raw;
        r
    }

    fn frame(&mut self, kind: u8, raw: &[u8]) -> std::io::Result<()> {
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(raw, LEVEL);
        let too_big = || std::io::Error::other("a trace block over 64 MiB");
        let plen = u32::try_from(packed.len()).map_err(|_| too_big())?;
        let rlen = u32::try_from(raw.len()).map_err(|_| too_big())?;
        if plen > MAX_FRAME || rlen > MAX_FRAME {
            return Err(too_big());
        }
        self.out.write_all(&[kind])?;
        self.out.write_all(&plen.to_le_bytes())?;
        self.out.write_all(&rlen.to_le_bytes())?;
        self.out.write_all(&packed)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.flush_block()?;
        let mut raw = Vec::new();
        put_varint(&mut raw, self.total);
        self.frame(b'E', &raw)?;
        self.out.flush()
    }
}

/// One line of a trace, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub time: Nanos,
    pub dev: String,
    pub event: String,
    pub flow: String,
    pub len: u32,
    pub class: String,
    pub reason: String,
    pub sojourn: Option<Nanos>,
    /// The classifying filter of an enqueue (`u32:1`), else `-`.
    pub filter: String,
}

/// Parse one line (not a comment); `None` for a line that is not a trace line.
pub fn parse_line(l: &str) -> Option<Line> {
    let w: Vec<&str> = l.split(' ').collect();
    if !(w.len() == 8 || w.len() == 9) || l.starts_with('#') {
        return None;
    }
    Some(Line {
        time: w[0].parse().ok()?,
        dev: w[1].to_string(),
        event: w[2].to_string(),
        flow: w[3].to_string(),
        len: w[4].parse().ok()?,
        class: w[5].to_string(),
        reason: w[6].to_string(),
        sojourn: w[7].parse().ok(),
        filter: w.get(8).unwrap_or(&"-").to_string(),
    })
}

/// A number in a trace's string table ([`Reader::name`]).
pub type Sym = u32;

/// One record read back, its strings as numbers in the reader's table (compared and counted without
/// spelling them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    pub time: Nanos,
    pub event: Ev,
    pub dev: Sym,
    pub flow: Sym,
    pub len: u32,
    pub class: Sym,
    /// The enqueue's verdict, the drop's reason, or `-`.
    pub reason: Sym,
    pub sojourn: Option<Nanos>,
    pub filter: Sym,
}

/// Which form a trace file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Text, of the version its `# tclab trace N` line gives.
    Text(u32),
    /// Binary (version 3).
    Binary,
}

/// Counts the bytes read, for a progress bar.
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// A trace read back record by record, in either form (told apart by the first byte), holding one
/// binary block or one text line at a time.
pub struct Reader<R: Read> {
    src: BufReader<Counted<R>>,
    form: Form,
    names: Vec<String>,
    /// Text form: string → number (looked up, never iterated).
    ids: BTreeMap<String, Sym>,
    /// Text form: the line last read, and its number.
    line: String,
    line_no: u64,
    /// Binary form: the block being read, and the next record in it.
    block: Vec<Rec>,
    at: usize,
    prev_time: Nanos,
    records: u64,
    blocks: u64,
    done: bool,
    /// Set when the trace ends early (a run stopped mid-write): what was ignored.
    pub cut_short: Option<String>,
    flow_lines: Vec<String>,
}

impl<R: Read> Reader<R> {
    /// Open a trace: its form from the first byte, then its header. Errors name what is wrong
    /// ("not a tclab trace", a cut or corrupt header).
    pub fn new(inner: R) -> Result<Reader<R>, String> {
        let mut src = BufReader::with_capacity(1 << 16, Counted { inner, n: 0 });
        let first = src.fill_buf().map_err(|e| e.to_string())?.first().copied();
        let form = match first {
            Some(0x89) => Form::Binary,
            Some(b'#') => Form::Text(0),
            _ => return Err(NOT_A_TRACE.into()),
        };
        let mut r = Reader {
            src,
            form,
            names: Vec::new(),
            ids: BTreeMap::new(),
            line: String::new(),
            line_no: 0,
            block: Vec::new(),
            at: 0,
            prev_time: 0,
            records: 0,
            blocks: 0,
            done: false,
            cut_short: None,
            flow_lines: Vec::new(),
        };
        match form {
            Form::Binary => r.binary_header()?,
            Form::Text(_) => r.text_header()?,
        }
        Ok(r)
    }

    pub fn form(&self) -> Form {
        self.form
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.src.get_ref().n
    }

    /// The string a record's number stands for.
    pub fn name(&self, s: Sym) -> &str {
        &self.names[s as usize]
    }

    /// The string table so far (numbers are indices).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The header's `# flow NAME PROTO PORTS` lines.
    pub fn flow_lines(&self) -> &[String] {
        &self.flow_lines
    }

    /// The text line the last record came from, as it was (text form only).
    pub fn raw_line(&self) -> Option<&str> {
        matches!(self.form, Form::Text(_)).then(|| self.line.trim_end_matches(['\n', '\r']))
    }

    /// A record as a text line (version 2), without its newline.
    pub fn text_line(&self, r: &Rec, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "{} {} {} {} {} {} {} ",
            r.time,
            self.name(r.dev),
            r.event.name(),
            self.name(r.flow),
            r.len,
            self.name(r.class),
            self.name(r.reason)
        );
        match r.sojourn {
            Some(s) => {
                let _ = write!(out, "{s}");
            }
            None => out.push('-'),
        }
        out.push(' ');
        out.push_str(self.name(r.filter));
    }

    /// A record with its strings spelled out.
    pub fn line(&self, r: &Rec) -> Line {
        Line {
            time: r.time,
            dev: self.name(r.dev).into(),
            event: r.event.name().into(),
            flow: self.name(r.flow).into(),
            len: r.len,
            class: self.name(r.class).into(),
            reason: self.name(r.reason).into(),
            sojourn: r.sojourn,
            filter: self.name(r.filter).into(),
        }
    }

    /// The next record; `None` at the end (or where a cut-short trace stops: see `cut_short`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Rec>, String> {
        if self.at < self.block.len() {
            self.at += 1;
            return Ok(Some(self.block[self.at - 1]));
        }
        if self.done {
            return Ok(None);
        }
        match self.form {
            Form::Text(_) => self.next_text(),
            Form::Binary => {
                while self.at >= self.block.len() {
                    if !self.next_block()? {
                        self.done = true;
                        return Ok(None);
                    }
                }
                self.at = 1;
                Ok(Some(self.block[0]))
            }
        }
    }

    fn sym(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as Sym;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// Read one line into `self.line`; false at the end.
    fn read_line(&mut self) -> Result<bool, String> {
        self.line.clear();
        let n = self
            .src
            .read_line(&mut self.line)
            .map_err(|e| format!("line {}: {e}", self.line_no + 1))?;
        self.line_no += 1;
        Ok(n > 0)
    }

    /// Comments up to the first record, which is parsed into the block so that `next` returns it.
    fn text_header(&mut self) -> Result<(), String> {
        let mut version = None;
        while self.read_line()? {
            let l = self.line.trim_end_matches(['\n', '\r']);
            if let Some(v) = l.strip_prefix("# tclab trace ") {
                version = Some(v.trim().parse().unwrap_or(0));
                continue;
            }
            if l.starts_with("# flow ") {
                self.flow_lines.push(l.to_string());
            }
            if l.starts_with('#') || l.is_empty() {
                continue;
            }
            let Some(v) = version else {
                return Err(NOT_A_TRACE.into());
            };
            self.form = Form::Text(v);
            if let Some(r) = self.parse_current()? {
                self.block = vec![r];
                self.at = 0;
            }
            return Ok(());
        }
        match version {
            Some(v) => {
                self.form = Form::Text(v);
                self.done = true;
                Ok(())
            }
            None => Err(NOT_A_TRACE.into()),
        }
    }

    fn next_text(&mut self) -> Result<Option<Rec>, String> {
        self.block.clear();
        self.at = 0;
        loop {
            if !self.read_line()? {
                self.done = true;
                return Ok(None);
            }
            let l = self.line.trim_end_matches(['\n', '\r']);
            if l.starts_with('#') || l.is_empty() {
                continue;
            }
            return self.parse_current();
        }
    }

    /// The record on the current line. A line that is not one is an error, unless it is the last line
    /// of the file: a run cut short leaves its last line half written, and what came before stands.
    fn parse_current(&mut self) -> Result<Option<Rec>, String> {
        let l = self.line.trim_end_matches(['\n', '\r']).to_string();
        if let Some(r) = self.parse_text(&l) {
            self.records += 1;
            return Ok(Some(r));
        }
        let n = self.line_no;
        if self.read_line()? {
            return Err(format!("line {n}: not a trace line: {l}"));
        }
        self.done = true;
        self.cut_short = Some(format!("line {n}: the last line is cut short; ignored"));
        Ok(None)
    }

    fn parse_text(&mut self, l: &str) -> Option<Rec> {
        let p = parse_line(l)?;
        let event = Ev::parse(&p.event)?;
        Some(Rec {
            time: p.time,
            event,
            dev: self.sym(&p.dev),
            flow: self.sym(&p.flow),
            len: p.len,
            class: self.sym(&p.class),
            reason: self.sym(&p.reason),
            sojourn: p.sojourn,
            filter: self.sym(&p.filter),
        })
    }

    fn binary_header(&mut self) -> Result<(), String> {
        let mut head = [0u8; 9];
        match read_full(&mut self.src, &mut head) {
            Ok(9) if head[..8] == MAGIC[..] => {}
            Ok(_) => return Err(NOT_A_TRACE.into()),
            Err(e) => return Err(e.to_string()),
        }
        if head[8] != VERSION {
            return Err(format!(
                "a binary trace of version {}, which this tclab cannot read (it reads version {VERSION})",
                head[8]
            ));
        }
        match self.frame()? {
            Some((b'H', raw)) => {
                let text = String::from_utf8(raw)
                    .map_err(|_| "corrupt: the header is not UTF-8".to_string())?;
                self.flow_lines = text.lines().map(str::to_string).collect();
                Ok(())
            }
            Some(_) => Err("corrupt: the first frame is not the header".into()),
            None => Err("cut short: the header is incomplete".into()),
        }
    }

    /// The next frame's kind and inflated contents; `None` if the file ends before a whole frame.
    fn frame(&mut self) -> Result<Option<(u8, Vec<u8>)>, String> {
        let mut head = [0u8; 9];
        let n = read_full(&mut self.src, &mut head).map_err(|e| e.to_string())?;
        if n < 9 {
            return Ok(None);
        }
        let kind = head[0];
        let plen = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        let rlen = u32::from_le_bytes([head[5], head[6], head[7], head[8]]);
        let at = self.bytes_read();
        if !matches!(kind, b'H' | b'B' | b'E') || plen > MAX_FRAME || rlen > MAX_FRAME {
            return Err(format!(
                "corrupt: a frame header near byte {at} makes no sense (kind {kind:#04x}, {plen} bytes)"
            ));
        }
        let mut packed = vec![0u8; plen as usize];
        if read_full(&mut self.src, &mut packed).map_err(|e| e.to_string())? < packed.len() {
            return Ok(None);
        }
        let raw = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&packed, rlen as usize)
            .map_err(|e| {
            format!(
                "corrupt: block {} does not inflate ({:?}): the file was damaged",
                self.blocks + 1,
                e.status
            )
        })?;
        if raw.len() != rlen as usize {
            return Err(format!(
                "corrupt: block {} inflates to {} bytes, not {rlen}",
                self.blocks + 1,
                raw.len()
            ));
        }
        Ok(Some((kind, raw)))
    }

    /// Read the next block into `self.block`; false at the end of the trace.
    fn next_block(&mut self) -> Result<bool, String> {
        match self.frame()? {
            None => {
                self.cut_short = Some(format!(
                    "cut short after {} records (the run stopped before the trace was finished?); \
                     the rest is lost",
                    self.records
                ));
                Ok(false)
            }
            Some((b'B', raw)) => {
                self.blocks += 1;
                self.decode_block(&raw).map_err(|e| {
                    format!("corrupt: block {}: {e}: the file was damaged", self.blocks)
                })?;
                Ok(true)
            }
            Some((b'E', raw)) => {
                let mut p = 0;
                let total =
                    get_varint(&raw, &mut p).map_err(|e| format!("corrupt: the end: {e}"))?;
                if total != self.records {
                    return Err(format!(
                        "corrupt: the trace says it holds {total} records, but {} were read",
                        self.records
                    ));
                }
                let mut rest = [0u8; 1];
                if read_full(&mut self.src, &mut rest).map_err(|e| e.to_string())? != 0 {
                    return Err("corrupt: bytes after the end of the trace".into());
                }
                Ok(false)
            }
            Some(_) => Err("corrupt: a second header".into()),
        }
    }

    fn decode_block(&mut self, raw: &[u8]) -> Result<(), String> {
        let mut p = 0;
        let n = get_varint(raw, &mut p)? as usize;
        if n > BLOCK_RECORDS * 16 {
            return Err(format!("{n} records in one block"));
        }
        let k = get_varint(raw, &mut p)?;
        for _ in 0..k {
            let len = get_varint(raw, &mut p)? as usize;
            let s = raw
                .get(p..p.saturating_add(len))
                .ok_or("a string runs past the block")?;
            p += len;
            let s = std::str::from_utf8(s).map_err(|_| "a string is not UTF-8")?;
            self.names.push(s.to_string());
        }
        let nsyms = self.names.len() as u64;
        let sym = |raw: &[u8], p: &mut usize| -> Result<Sym, String> {
            let v = get_varint(raw, p)?;
            if v >= nsyms {
                return Err(format!("string number {v} of {nsyms}"));
            }
            Ok(v as Sym)
        };
        self.block.clear();
        self.at = 0;
        let mut t = self.prev_time;
        for _ in 0..n {
            let d = get_varint(raw, &mut p)?;
            // Zigzag back to a signed difference.
            let d = ((d >> 1) as i64) ^ -((d & 1) as i64);
            t = t.wrapping_add(d as u64);
            self.block.push(Rec {
                time: t,
                event: Ev::Enq,
                dev: 0,
                flow: 0,
                len: 0,
                class: 0,
                reason: 0,
                sojourn: None,
                filter: 0,
            });
        }
        self.prev_time = t;
        for r in &mut self.block {
            let e = *raw.get(p).ok_or("the event column is short")?;
            r.event = *Ev::ALL.get(e as usize).ok_or(format!("event {e}"))?;
            p += 1;
        }
        for r in &mut self.block {
            r.dev = sym(raw, &mut p)?;
        }
        for r in &mut self.block {
            r.flow = sym(raw, &mut p)?;
        }
        for r in &mut self.block {
            r.len = u32::try_from(get_varint(raw, &mut p)?).map_err(|_| "a length over 4 GiB")?;
        }
        for r in &mut self.block {
            r.class = sym(raw, &mut p)?;
        }
        for r in &mut self.block {
            r.reason = sym(raw, &mut p)?;
        }
        for r in &mut self.block {
            r.sojourn = get_varint(raw, &mut p)?.checked_sub(1);
        }
        for r in &mut self.block {
            r.filter = sym(raw, &mut p)?;
        }
        if p != raw.len() {
            return Err(format!("{} bytes left over", raw.len() - p));
        }
        self.records += n as u64;
        Ok(())
    }
}

const NOT_A_TRACE: &str = "not a tclab trace (no \"# tclab trace\" header, nor a binary trace's)";

/// Read until `buf` is full or the input ends; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn get_varint(b: &[u8], p: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*p).ok_or("a column is short")?;
        *p += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a number longer than 64 bits".into())
}
