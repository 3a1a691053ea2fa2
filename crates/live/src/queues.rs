//! Several transmit queues, one thread each: `tclab live --queues N`.
//!
//! A multi-queue NIC gives each CPU its own transmit queue, and a policy that must scale with cores is
//! written for it: an `mq` root with one tree per queue (LibreQoS's layout: an HTB per queue, flows
//! steered to a queue by hash), so that no lock is shared between the queues. `tclab live` does the
//! same in user space. Each queue is a thread with its own engine (the whole policy, replayed from the
//! same journal) and its own packet socket on each port; the sockets of a port form a fanout group
//! (`PACKET_FANOUT_HASH`), so the kernel hands every frame of a flow to the same thread. A thread
//! enqueues what it forwards with `queue_mapping` set to its queue, so the mq root sends it into that
//! queue's tree, the only one that thread's engine ever fills.
//!
//! What is shared is the control plane. The main thread listens on the control socket and hands each
//! `tclab tc` call to every queue: a change applies to every engine alike, so they stay copies of one
//! policy; a `tc -s … show` is answered from the queue that owns each object — a qdisc, class or filter
//! below mq's class `M:k` lives in queue `k - 1`'s engine; the other engines hold an idle copy of it —
//! and the mq root's counters are the sum of all the queues', as the kernel's `mq_dump` sums its
//! children.
//!
//! What cannot be split this way is refused with several queues: a root that is not mq (one tree
//! shaping all queues' traffic would become N trees each allowing the whole rate), and the ingress
//! hook and ifbs (a policer or an ifb's shaper would count each queue's share alone).

use crate::bridge::{open_ports, Bridge, Call, Calls, OpenPort, PortStats, Rings, Setup};
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use tclab_core::engine::{DevKind, Engine};
use tclab_core::qdisc::QdiscStats;
use tclab_core::{Handle, Nanos};

/// What one queue's engine answered to a call, with where each object of its devices lives.
pub struct Answer {
    pub out: tclab_tc::Output,
    pub layout: Vec<DevLayout>,
    /// The counters a sample reads (for [`SAMPLE`] calls only).
    pub counts: Vec<crate::sampler::Count>,
}

/// The call that asks a queue for its counters (`tclab live --queues N --out DIR`): not a command a
/// user can send (an argument cannot hold a NUL byte).
pub const SAMPLE: &str = "\0sample";

/// Where the objects of one device live: its root qdisc's handle and counters (this engine's share,
/// added up over the queues in a show); when the root is mq, its handle, and the queue (0-based) that
/// owns each qdisc major below it.
#[derive(Clone, Debug, Default)]
pub struct DevLayout {
    pub dev: String,
    pub root: Option<(Handle, QdiscStats)>,
    pub mq: Option<(Handle, QdiscStats)>,
    pub majors: Vec<(u16, usize)>,
    /// The qdiscs' majors in the order a show lists them (the order of their classes' sections).
    pub order: Vec<u16>,
}

impl DevLayout {
    fn queue_of_major(&self, major: u16) -> Option<usize> {
        self.majors
            .iter()
            .find(|(m, _)| *m == major)
            .map(|&(_, q)| q)
    }

    /// The queue whose tree hangs below `parent` (a class of mq, or anything in a queue's tree).
    fn queue_below(&self, parent: Handle) -> Option<usize> {
        match self.mq {
            Some((m, _)) if parent.major() == m.major() && parent.minor() > 0 => {
                Some(parent.minor() as usize - 1)
            }
            _ => self.queue_of_major(parent.major()),
        }
    }
}

/// Where every device's objects live in `engine` (see [`DevLayout`]).
pub fn layout(engine: &Engine) -> Vec<DevLayout> {
    let mut out = Vec::new();
    for (name, d) in engine.devices() {
        let qdiscs = d.qdiscs();
        let mut l = DevLayout {
            dev: name.to_string(),
            ..Default::default()
        };
        l.order = qdiscs
            .iter()
            .map(|q| q.handle.major())
            .filter(|&m| m != 0)
            .collect();
        l.root = qdiscs
            .iter()
            .find(|q| q.parent == Handle::ROOT)
            .map(|q| (q.handle, q.stats));
        l.mq = qdiscs
            .iter()
            .find(|q| q.parent == Handle::ROOT && q.kind == "mq")
            .map(|q| (q.handle, q.stats));
        if l.mq.is_some() {
            // Down the tree: a qdisc belongs to the queue of what it hangs below.
            loop {
                let mut grew = false;
                for q in &qdiscs {
                    let major = q.handle.major();
                    if major == 0 || q.parent == Handle::ROOT || l.queue_of_major(major).is_some() {
                        continue;
                    }
                    if let Some(k) = l.queue_below(q.parent) {
                        l.majors.push((major, k));
                        grew = true;
                    }
                }
                if !grew {
                    break;
                }
            }
        }
        out.push(l);
    }
    out
}

/// The transmit queues of each port whose mq class still has the default qdisc mq gave it while another
/// queue has a tree of the policy's: the flows the fanout hash puts there are not shaped at all (half
/// the traffic, when two trees are written for four queues). One line per port, for the start.
pub fn unshaped_queues(engine: &Engine, ports: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, d) in engine.devices() {
        if !ports.iter().any(|p| p == name) {
            continue;
        }
        let qdiscs = d.qdiscs();
        let Some(mq) = qdiscs
            .iter()
            .find(|q| q.parent == Handle::ROOT && q.kind == "mq")
            .map(|q| q.handle)
        else {
            continue;
        };
        // mq's children: a default one has no handle (`qdisc pfifo_fast 0: parent 7fff:3`).
        let children: Vec<_> = qdiscs
            .iter()
            .filter(|q| q.parent.major() == mq.major() && q.parent != Handle::ROOT)
            .collect();
        let default: Vec<String> = children
            .iter()
            .filter(|q| q.handle.major() == 0)
            .map(|q| q.parent.to_string())
            .collect();
        if !default.is_empty() && default.len() < children.len() {
            let one = default.len() == 1;
            out.push(format!(
                "{name}: mq's {} {} {} the default qdisc while the policy gives the other queues trees \
                 of their own: flows hashed to {} are not shaped",
                if one { "class" } else { "classes" },
                default.join(", "),
                if one { "keeps" } else { "keep" },
                if one { "it" } else { "them" },
            ));
        }
    }
    out
}

/// Why a policy cannot run on `queues` queues, if it cannot: the ports' roots must be mq (or the
/// default), and nothing may hang on their ingress hooks or on an ifb.
pub fn refuse(engine: &Engine, ports: &[String], queues: usize) -> Option<String> {
    if queues <= 1 {
        return None;
    }
    for (name, d) in engine.devices() {
        if d.kind == DevKind::Ifb {
            return Some(format!(
                "--queues {queues}: the policy shapes through {name}, an ifb; an ifb's shaper (and \
                 an ingress policer) must see every queue's packets, so it runs with one queue only: \
                 leave --queues out"
            ));
        }
        if !ports.iter().any(|p| p == name) {
            continue;
        }
        for q in d.qdiscs() {
            if q.parent == Handle::INGRESS || q.kind == "ingress" || q.kind == "clsact" {
                return Some(format!(
                    "--queues {queues}: {name} has an {} qdisc; its filters and policers must see every \
                     queue's packets, so it runs with one queue only: leave --queues out",
                    q.kind
                ));
            }
            if q.parent == Handle::ROOT && !matches!(q.kind, "mq" | "noqueue" | "pfifo_fast") {
                return Some(format!(
                    "--queues {queues}: {name}'s root is {} {}, one tree for every queue; with several \
                     queues each needs its own tree under an mq root, as on a multi-queue NIC: `tc \
                     qdisc add dev {name} root handle 7fff: mq`, then a tree at each of `parent \
                     7fff:1` … `7fff:{queues:x}`",
                    q.kind, q.handle
                ));
            }
        }
    }
    None
}

/// The queues' threads and the control socket they share.
pub struct Queues {
    workers: Vec<Worker>,
    quit: Arc<AtomicBool>,
    control: Option<crate::bridge::Control>,
    epoch: u64,
}

struct Worker {
    calls: mpsc::Sender<Call>,
    waker: Arc<sys::Waker>,
    thread: std::thread::JoinHandle<Result<Vec<(String, PortStats)>, String>>,
}

impl Queues {
    /// Open `queues` sockets on each of `devs` (turning their offloads off), to be bridged by
    /// [`Queues::start`] once the process has given up its privileges.
    pub fn open(
        devs: &[String],
        queues: usize,
        rings: Rings,
    ) -> Result<(Vec<Vec<OpenPort>>, Setup), String> {
        open_ports(devs, queues, rings)
    }

    /// Start a thread per queue, each with the policy `journal` replayed into an engine of its own
    /// (an engine is not shared between threads). Returns once every thread has its engine, or with
    /// the first one's error.
    pub fn start(journal: Vec<Vec<String>>, ports: Vec<Vec<OpenPort>>) -> Result<Queues, String> {
        let quit = Arc::new(AtomicBool::new(false));
        let journal = Arc::new(journal);
        let mut workers = Vec::new();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        // Every queue's bridge meets the same port events: each warning said once for all.
        let said = crate::bridge::Said::default();
        for (k, ports) in ports.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            let waker = Arc::new(sys::Waker::new().map_err(|e| e.to_string())?);
            let calls = Calls {
                rx,
                waker: waker.clone(),
                quit: quit.clone(),
                said: said.clone(),
            };
            let journal = journal.clone();
            let ready = ready_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("tclab-queue-{k}"))
                .spawn(move || {
                    let (engine, problems) = tclab_tc::store::replay(&journal);
                    if let Some(p) = problems.first() {
                        let e = format!("queue {k}: the policy did not apply again: {p}");
                        let _ = ready.send(Err(e.clone()));
                        return Err(e);
                    }
                    let mut bridge = Bridge::on_ports(engine, ports);
                    bridge.serve_queue(k as u16, calls);
                    let _ = ready.send(Ok(()));
                    bridge.run(None)?;
                    Ok(bridge.stats())
                })
                .map_err(|e| format!("cannot start a thread for queue {k}: {e}"))?;
            workers.push(Worker {
                calls: tx,
                waker,
                thread,
            });
        }
        drop(ready_tx);
        let queues = Queues {
            workers,
            quit,
            control: None,
            epoch: sys::monotonic_ns(),
        };
        for _ in 0..queues.workers.len() {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    queues.stop();
                    return Err(e);
                }
                Err(_) => break,
            }
        }
        Ok(queues)
    }

    /// Listen at `path` for `tclab tc|iptables|link` calls (mode 0600), as a one-queue bridge does.
    pub fn listen(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.control = Some(crate::bridge::Control::bind(path)?);
        Ok(())
    }

    /// Nanoseconds since the queues started.
    pub fn now(&self) -> Nanos {
        sys::monotonic_ns().saturating_sub(self.epoch)
    }

    /// Answer control calls, and take `sampler`'s samples of every queue's counters added up, until
    /// SIGINT/SIGTERM/SIGHUP, `duration`, or a queue's thread ends (an error).
    pub fn run(
        &mut self,
        duration: Option<Nanos>,
        mut sampler: Option<&mut crate::sampler::Sampler>,
    ) {
        let deadline = duration.map(|d| self.now().saturating_add(d));
        while !sys::STOP.load(Ordering::Relaxed) {
            let now = self.now();
            if deadline.is_some_and(|d| now >= d)
                || self.workers.iter().any(|w| w.thread.is_finished())
            {
                break;
            }
            if let Some(s) = sampler.as_deref_mut().filter(|s| now >= s.next_due()) {
                s.tick_counts(now, &self.counts());
            }
            // Signals go to whichever thread the kernel picks: wake at least every 100 ms to look.
            let wait = [deadline, sampler.as_ref().map(|s| s.next_due())]
                .into_iter()
                .flatten()
                .map(|t| t.saturating_sub(now))
                .fold(100_000_000, u64::min);
            let fds: Vec<i32> = self.control.iter().map(|c| c.raw()).collect();
            let _ = sys::wait(&fds, &[], Some(wait));
            while let Some(conn) = self.control.as_ref().and_then(|c| c.accept()) {
                tclab_tc::control::serve_connection(conn, crate::bridge::CALL_TIMEOUT, |req| {
                    self.call(&req.argv, req.stdin.clone())
                });
            }
        }
    }

    /// Every queue's counters added up, for a sample.
    pub fn counts(&self) -> Vec<crate::sampler::Count> {
        let all: Vec<Vec<crate::sampler::Count>> = self
            .ask(&[SAMPLE.to_string()], None)
            .map(|answers| answers.into_iter().map(|a| a.counts).collect())
            .unwrap_or_default();
        crate::sampler::add_up(&all)
    }

    /// One call, handed to every queue; the answers merged (see the module's comment).
    pub fn call(&self, argv: &[String], stdin: Option<String>) -> tclab_tc::Output {
        if let Some(why) = unsplittable(argv, stdin.as_deref(), self.workers.len()) {
            return tclab_tc::Output {
                stderr: format!("tclab live: {why}\n"),
                code: 2,
                ..Default::default()
            };
        }
        match self.ask(argv, stdin) {
            Ok(answers) => merge(argv, &answers),
            Err(why) => failed(why),
        }
    }

    /// Hand `argv` to every queue and wait for their answers.
    fn ask(&self, argv: &[String], stdin: Option<String>) -> Result<Vec<Answer>, &'static str> {
        let mut replies = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            let call = Call {
                argv: argv.to_vec(),
                stdin: stdin.clone(),
                reply: tx,
            };
            if w.calls.send(call).is_err() {
                return Err("a queue's thread has stopped");
            }
            w.waker.wake();
            replies.push(rx);
        }
        let mut answers = Vec::new();
        for rx in replies {
            match rx.recv_timeout(std::time::Duration::from_secs(5)) {
                Ok(a) => answers.push(a),
                Err(_) => return Err("a queue did not answer within 5 s"),
            }
        }
        Ok(answers)
    }

    /// `tc -s qdisc|class|filter show` of every device, merged, each under a heading naming it (the
    /// summary `tclab live` prints when it stops).
    pub fn show_all(&self) -> String {
        let words = |w: &str| w.split_whitespace().map(String::from).collect::<Vec<_>>();
        let mut text = String::new();
        let names = self.call(&words("link show"), None).stdout;
        for dev in names.lines() {
            text.push_str(&format!("### tc -s qdisc|class|filter show dev {dev}\n"));
            // As `tclab_tc::show_device` (no ingress part: several queues run without one).
            for what in ["qdisc", "class", "filter"] {
                text.push_str(
                    &self
                        .call(&words(&format!("tc -s {what} show dev {dev}")), None)
                        .stdout,
                );
            }
        }
        text
    }

    fn stop(&self) {
        self.quit.store(true, Ordering::Relaxed);
        for w in &self.workers {
            w.waker.wake();
        }
    }

    /// Stop every queue; the ports' counters added up over the queues.
    pub fn finish(self) -> Result<Vec<(String, PortStats)>, String> {
        self.stop();
        let mut total: Vec<(String, PortStats)> = Vec::new();
        let mut error = None;
        for w in self.workers {
            match w.thread.join() {
                Ok(Ok(stats)) => {
                    for (name, s) in stats {
                        match total.iter_mut().find(|(n, _)| *n == name) {
                            Some((_, t)) => add(t, &s),
                            None => total.push((name, s)),
                        }
                    }
                }
                Ok(Err(e)) => error = error.or(Some(e)),
                Err(_) => error = error.or(Some("a queue's thread panicked".to_string())),
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }
}

/// Why a `tc` call (or a line of its batch) would undo the split over `queues` queues, if it would: a
/// root that is not mq, or an ingress hook (see [`refuse`]; the policy was checked whole at the start,
/// a change must keep it so).
fn unsplittable(argv: &[String], stdin: Option<&str>, queues: usize) -> Option<String> {
    let (Some(cmd), Some(args)) = (argv.first(), argv.get(1..)) else {
        return None;
    };
    if cmd != "tc" {
        return None;
    }
    let one = |words: &[&str]| -> Option<String> {
        let words: Vec<&str> = words
            .iter()
            .copied()
            .skip_while(|w| w.starts_with('-'))
            .collect();
        let (object, verb) = (words.first()?, words.get(1)?);
        let changes = ["add", "replace", "change", "link"].contains(verb);
        if !(changes && ["qdisc", "qd", "q"].contains(object)) {
            return None;
        }
        if words.iter().any(|w| *w == "ingress" || *w == "clsact") {
            return Some(format!(
                "with {queues} queues there is no ingress hook (its policers would count each queue's \
                 share alone): restart tclab live without --queues to use one"
            ));
        }
        if words.contains(&"root") && !words.contains(&"mq") {
            return Some(format!(
                "with {queues} queues the root must stay mq, a tree per queue (one tree at the root \
                 would shape each queue's share to the whole rate)"
            ));
        }
        None
    };
    if tclab_tc::store::batch_arg(args).is_some() {
        let text = stdin.unwrap_or("");
        for (n, line) in tclab_tc::store::batch_lines(text) {
            // An unclosed quote is the engine's to refuse.
            let words = tclab_tc::store::batch_words(&line).unwrap_or_default();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            if let Some(why) = one(&words) {
                return Some(format!("{why}\nCommand failed -:{n}"));
            }
        }
        return None;
    }
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    one(&words)
}

fn add(t: &mut PortStats, s: &PortStats) {
    t.rx_packets += s.rx_packets;
    t.rx_bytes += s.rx_bytes;
    t.rx_dropped += s.rx_dropped;
    t.tx_packets += s.tx_packets;
    t.tx_bytes += s.tx_bytes;
    t.malformed += s.malformed;
    t.oversize += s.oversize;
    t.stale += s.stale;
    t.tx_errors += s.tx_errors;
    t.tx_dropped += s.tx_dropped;
    t.rx_lost += s.rx_lost;
    t.rx_csum_partial += s.rx_csum_partial;
    t.tx_purged += s.tx_purged;
    t.rx_ring += s.rx_ring;
    t.tx_ring += s.tx_ring;
    t.wakeups += s.wakeups;
    t.late_ns_sum += s.late_ns_sum;
    t.late_ns_max = t.late_ns_max.max(s.late_ns_max);
}

fn failed(why: &str) -> tclab_tc::Output {
    tclab_tc::Output {
        stderr: format!("tclab live: {why}\n"),
        code: 1,
        ..Default::default()
    }
}

/// Who answers for one object of a show: a queue, every queue added up (the mq root), or any (they
/// all print the same).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Owner {
    Queue(usize),
    Sum,
    Any,
}

/// What names an object in a show: from a text header (`qdisc htb 10: dev eth0 parent 7fff:1 …`) or a
/// JSON element's fields.
#[derive(Default)]
struct Ident<'a> {
    object: &'a str,
    kind: &'a str,
    handle: Option<Handle>,
    parent: Option<Handle>,
    dev: Option<&'a str>,
}

fn parse_handle(s: &str) -> Option<Handle> {
    if s == "root" {
        return Some(Handle::ROOT);
    }
    let (maj, min) = s.split_once(':')?;
    let maj = u16::from_str_radix(maj, 16).ok()?;
    let min = if min.is_empty() {
        0
    } else {
        u16::from_str_radix(min, 16).ok()?
    };
    Some(Handle::new(maj, min))
}

impl<'a> Ident<'a> {
    fn from_header(line: &'a str) -> Ident<'a> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let after = |k: &str| {
            w.iter()
                .position(|x| *x == k)
                .and_then(|i| w.get(i + 1))
                .copied()
        };
        let object = w.first().copied().unwrap_or("");
        let mut id = Ident {
            object,
            dev: after("dev"),
            parent: after("parent").and_then(parse_handle),
            ..Default::default()
        };
        if object != "filter" {
            id.kind = w.get(1).copied().unwrap_or("");
            id.handle = w.get(2).and_then(|h| parse_handle(h));
            if w.contains(&"root") {
                id.parent = Some(Handle::ROOT);
            }
        }
        id
    }

    fn from_json(v: &'a serde_json::Value, object: &'a str) -> Ident<'a> {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str());
        let mut id = Ident {
            object,
            kind: s("kind").unwrap_or(""),
            handle: s("handle").and_then(parse_handle),
            parent: s("parent").and_then(parse_handle),
            dev: s("dev"),
        };
        if v.get("root").and_then(|r| r.as_bool()) == Some(true) {
            id.parent = Some(Handle::ROOT);
        }
        id
    }

    /// A filter listed without its parent hangs on the one the show asked for.
    fn asked(mut self, parent: Option<Handle>) -> Ident<'a> {
        if self.object == "filter" && self.parent.is_none() {
            self.parent = parent;
        }
        self
    }

    fn owner(&self, layout: &[DevLayout], dev: Option<&str>) -> Owner {
        let dev = self.dev.or(dev);
        let Some(l) = layout
            .iter()
            .find(|l| Some(l.dev.as_str()) == dev)
            .or_else(|| (layout.len() == 1).then(|| &layout[0]))
        else {
            return Owner::Any;
        };
        if self.object == "qdisc"
            && self.parent == Some(Handle::ROOT)
            && l.root.is_some_and(|(r, _)| Some(r) == self.handle)
        {
            // Every queue's engine has its own root (mq's counters are its children's).
            return Owner::Sum;
        }
        if l.mq.is_none() {
            return Owner::Any;
        }
        let found = match (self.object, self.handle, self.parent) {
            ("qdisc", Some(h), _) if h.major() != 0 && l.queue_of_major(h.major()).is_some() => {
                l.queue_of_major(h.major())
            }
            ("qdisc", _, Some(p)) => l.queue_below(p),
            ("class", Some(c), _) => l.queue_below(c),
            ("filter", _, Some(p)) => l.queue_below(p),
            _ => None,
        };
        found.map_or(Owner::Any, Owner::Queue)
    }
}

/// What a `tc` call shows: the object (`qdisc`, `class`, `filter`), the device it names, whether as
/// JSON, and the `parent` it names — tc leaves that parent out of each filter's line (it prints a
/// filter's parent only when it differs from the one asked for), so the merge must take it from here.
struct Shown<'a> {
    object: Option<&'static str>,
    dev: Option<&'a str>,
    json: bool,
    parent: Option<Handle>,
}

fn shown(argv: &[String]) -> Shown<'_> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    let json = words
        .iter()
        .any(|w| w.starts_with('-') && matches!(w.trim_start_matches('-'), "j" | "json"));
    let object = words.iter().find_map(|w| match *w {
        "qdisc" | "q" | "qd" => Some("qdisc"),
        "class" | "c" | "cl" => Some("class"),
        "filter" | "f" | "fi" => Some("filter"),
        _ => None,
    });
    let dev = words.windows(2).find(|w| w[0] == "dev").map(|w| w[1]);
    let parent = words
        .windows(2)
        .find(|w| w[0] == "parent")
        .and_then(|w| parse_handle(w[1]));
    Shown {
        object,
        dev,
        json,
        parent,
    }
}

/// The queues' answers to one call as one: identical answers are that answer; a show whose counters
/// differ takes each object from the queue that owns it, and the mq roots' counters added up.
fn merge(argv: &[String], answers: &[Answer]) -> tclab_tc::Output {
    let Some(first) = answers.first() else {
        return failed("no queue answered");
    };
    if answers.iter().all(|a| a.out == first.out) {
        return first.out.clone();
    }
    let asked = shown(argv);
    let (Some(object), true) = (asked.object, argv.first().is_some_and(|c| c == "tc")) else {
        return first.out.clone();
    };
    let mut out = first.out.clone();
    if asked.json {
        if let Some(text) = merge_json(object, &asked, answers, argv) {
            out.stdout = text;
            return out;
        }
    }
    out.stdout = merge_text(object, &asked, answers);
    out
}

/// Split a show's text into objects: each starts at a line that names one (`qdisc `, `class `,
/// `filter `); the text before the first is kept as it is.
fn blocks(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("qdisc ") || line.starts_with("class ") || line.starts_with("filter ") {
            starts.push(at);
        }
        at += line.len();
    }
    let mut out = Vec::new();
    let mut prev = 0;
    for &s in &starts {
        if s > prev {
            out.push(&text[prev..s]);
        }
        prev = s;
    }
    if prev < text.len() {
        out.push(&text[prev..]);
    }
    out
}

fn merge_text(object: &str, asked: &Shown, answers: &[Answer]) -> String {
    let dev = asked.dev;
    let split: Vec<Vec<&str>> = answers.iter().map(|a| blocks(&a.out.stdout)).collect();
    let layout = &answers[0].layout;
    if object != "qdisc" {
        return merge_sections(dev, asked.parent, &split, layout);
    }
    if split.iter().any(|b| b.len() != split[0].len()) {
        // Not the same qdiscs (a call raced a change): the first queue's view, unmerged.
        return answers[0].out.stdout.clone();
    }
    let mut text = String::new();
    for (i, block) in split[0].iter().enumerate() {
        let header = block.lines().next().unwrap_or("");
        match Ident::from_header(header).owner(layout, dev) {
            Owner::Queue(k) if k < split.len() => text.push_str(split[k][i]),
            Owner::Sum => text.push_str(&summed_block(block, header, dev, answers)),
            _ => text.push_str(block),
        }
    }
    text
}

/// A class or filter show merged by sections: the objects of one qdisc (its classes, the filters
/// attached to it or its classes) come from the queue that owns that qdisc — whole, since a queue's
/// engine may list objects the others do not have (fq_codel's and CAKE's active flows are classes) —
/// and the sections follow the order the qdiscs are listed in. The mq root's own classes are taken
/// one by one from the queue each leads to. `asked`: the parent the show named, which its filters'
/// lines leave out.
fn merge_sections(
    dev: Option<&str>,
    asked: Option<Handle>,
    split: &[Vec<&str>],
    layout: &[DevLayout],
) -> String {
    let l = layout
        .iter()
        .find(|l| Some(l.dev.as_str()) == dev)
        .or_else(|| (layout.len() == 1).then(|| &layout[0]));
    let section = |block: &str| -> Option<u16> {
        let id = Ident::from_header(block.lines().next().unwrap_or("")).asked(asked);
        match id.object {
            "class" => id.handle.map(|h| h.major()),
            "filter" => id.parent.map(|p| p.major()),
            _ => None,
        }
    };
    let key = |block: &str| -> String {
        let header = block.lines().next().unwrap_or("");
        header
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Sections in the qdiscs' order, then any other, as they come.
    let mut sections: Vec<u16> = l.map(|l| l.order.clone()).unwrap_or_default();
    for blocks in split {
        for b in blocks {
            if let Some(s) = section(b) {
                if !sections.contains(&s) {
                    sections.push(s);
                }
            }
        }
    }
    let mq = l.and_then(|l| l.mq).map(|(h, _)| h.major());
    // What comes before the first object (nothing, for tc's own shows), from the first queue.
    let mut text: String = split[0]
        .iter()
        .take_while(|b| section(b).is_none())
        .copied()
        .collect();
    for s in sections {
        if Some(s) == mq {
            for b in split[0].iter().filter(|b| section(b) == Some(s)) {
                let header = b.lines().next().unwrap_or("");
                let k = match Ident::from_header(header).asked(asked).owner(layout, dev) {
                    Owner::Queue(k) if k < split.len() => k,
                    _ => 0,
                };
                let theirs = split[k]
                    .iter()
                    .find(|x| section(x) == Some(s) && key(x) == key(b))
                    .unwrap_or(b);
                text.push_str(theirs);
            }
            continue;
        }
        let k = l
            .and_then(|l| l.queue_of_major(s))
            .filter(|&k| k < split.len())
            .unwrap_or(0);
        for b in split[k].iter().filter(|b| section(b) == Some(s)) {
            text.push_str(b);
        }
    }
    text
}

/// A root qdisc's text with the counters of every queue's engine added up.
fn summed_block(block: &str, header: &str, dev: Option<&str>, answers: &[Answer]) -> String {
    let id = Ident::from_header(header);
    let dev = id.dev.or(dev);
    let mut sum = QdiscStats::default();
    for a in answers {
        let mine = a
            .layout
            .iter()
            .find(|l| Some(l.dev.as_str()) == dev || (dev.is_none() && a.layout.len() == 1));
        if let Some((_, s)) = mine.and_then(|l| l.root) {
            sum.bytes += s.bytes;
            sum.packets += s.packets;
            sum.drops += s.drops;
            sum.overlimits += s.overlimits;
            sum.requeues += s.requeues;
            sum.backlog += s.backlog;
            sum.qlen += s.qlen;
        }
    }
    let lines: Vec<&str> = block.split_inclusive('\n').collect();
    let Some(at) = lines.iter().position(|l| l.starts_with(" Sent ")) else {
        return block.to_string();
    };
    let mut out: String = lines[..at].concat();
    out.push_str(&tclab_tc::show::stats_text(&sum));
    // The two lines `stats_text` replaces, then what follows them.
    out.push_str(&lines[(at + 2).min(lines.len())..].concat());
    out
}

/// A JSON show merged element by element; `None` if an answer is not a JSON array.
fn merge_json(
    object: &'static str,
    asked: &Shown,
    answers: &[Answer],
    argv: &[String],
) -> Option<String> {
    let parsed: Vec<Vec<serde_json::Value>> = answers
        .iter()
        .map(|a| serde_json::from_str::<Vec<serde_json::Value>>(&a.out.stdout).ok())
        .collect::<Option<_>>()?;
    if parsed.iter().any(|p| p.len() != parsed[0].len()) {
        return None;
    }
    let layout = &answers[0].layout;
    let mut merged = Vec::new();
    for (i, v) in parsed[0].iter().enumerate() {
        let owner = Ident::from_json(v, object)
            .asked(asked.parent)
            .owner(layout, asked.dev);
        merged.push(match owner {
            Owner::Queue(k) if k < parsed.len() => parsed[k][i].clone(),
            Owner::Sum => {
                let mut v = v.clone();
                for key in [
                    "bytes",
                    "packets",
                    "drops",
                    "overlimits",
                    "requeues",
                    "backlog",
                    "qlen",
                ] {
                    let total: u64 = parsed.iter().filter_map(|p| p[i].get(key)?.as_u64()).sum();
                    if let Some(x) = v.get_mut(key) {
                        *x = total.into();
                    }
                }
                v
            }
            _ => v.clone(),
        });
    }
    let flags = tclab_tc::ShowFlags {
        json: true,
        pretty: argv
            .iter()
            .any(|w| w.starts_with('-') && matches!(w.trim_start_matches('-'), "p" | "pretty")),
        ..Default::default()
    };
    let mut p = tclab_tc::jprint::Printer::new(flags);
    for v in &merged {
        p.value(None, v);
    }
    Some(p.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(stdout: &str, layout: Vec<DevLayout>) -> Answer {
        Answer {
            out: tclab_tc::Output {
                stdout: stdout.to_string(),
                ..Default::default()
            },
            layout,
            counts: Vec::new(),
        }
    }

    /// Two queues' engines of the policy `mq` 7fff: with an HTB 1: at 7fff:1 and an HTB 2: at 7fff:2:
    /// each object is taken from the queue that owns it, the mq root's counters added up.
    /// An engine whose eth0 has two transmit queues, with the tc commands `lines` applied.
    fn two_queues(lines: &[&str]) -> Engine {
        let mut e = Engine::new();
        tclab_tc::store::apply_record(
            &mut e,
            &["link", "add", "dev", "eth0", "numtxqueues", "2"].map(String::from),
        )
        .unwrap();
        for l in lines {
            let w: Vec<String> = l.split_whitespace().map(String::from).collect();
            assert_eq!(tclab_tc::run(&mut e, &w, 0).code, 0, "{l}");
        }
        e
    }

    #[test]
    fn a_show_takes_each_object_from_its_queue_and_adds_up_the_root() {
        let e = two_queues(&[
            "qdisc add dev eth0 root handle 7fff: mq",
            "qdisc add dev eth0 parent 7fff:1 handle 1: htb default 10",
            "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
            "qdisc add dev eth0 parent 7fff:2 handle 2: htb default 10",
            "class add dev eth0 parent 2: classid 2:10 htb rate 1mbit",
            "qdisc add dev eth0 parent 2:10 handle 20: fq_codel",
        ]);
        let mut l = layout(&e);
        let eth0 = l.iter_mut().find(|l| l.dev == "eth0").unwrap();
        assert_eq!(eth0.mq.map(|m| m.0), Some(Handle::new(0x7fff, 0)));
        eth0.majors.sort();
        assert_eq!(eth0.majors, vec![(1, 0), (2, 1), (0x20, 1)]);
        let with = |bytes: u64| {
            let mut l = l.clone();
            for d in &mut l {
                if let Some((_, s)) = d.root.as_mut() {
                    s.bytes = bytes;
                    s.packets = bytes / 1000;
                }
            }
            l
        };
        let q0 = "qdisc mq 7fff: root \n Sent 3000 bytes 3 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 1: parent 7fff:1 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 3000 bytes 3 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 2: parent 7fff:2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        let q1 = "qdisc mq 7fff: root \n Sent 5000 bytes 5 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 1: parent 7fff:1 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 2: parent 7fff:2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 5000 bytes 5 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        let argv: Vec<String> = "tc -s qdisc show dev eth0"
            .split(' ')
            .map(String::from)
            .collect();
        let out = merge(&argv, &[answer(q0, with(3000)), answer(q1, with(5000))]);
        let want = "qdisc mq 7fff: root \n Sent 8000 bytes 8 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 1: parent 7fff:1 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 3000 bytes 3 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
qdisc htb 2: parent 7fff:2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 5000 bytes 5 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        assert_eq!(out.stdout, want);
        // A class show: each qdisc's classes from its queue, with the flows only that queue's
        // fq_codel has; the mq classes one by one from the queue each leads to.
        let c0 = "class mq 7fff:1 root leaf 1: \n Sent 3000 bytes\nclass mq 7fff:2 root leaf 2: \n Sent 0 bytes\n\
class htb 1:10 root prio 0 rate 1Mbit\n Sent 3000 bytes\nclass htb 2:10 root leaf 20: prio 0 rate 1Mbit\n Sent 0 bytes\n";
        let c1 = "class mq 7fff:1 root leaf 1: \n Sent 0 bytes\nclass mq 7fff:2 root leaf 2: \n Sent 5000 bytes\n\
class htb 1:10 root prio 0 rate 1Mbit\n Sent 0 bytes\nclass htb 2:10 root leaf 20: prio 0 rate 1Mbit\n Sent 5000 bytes\n\
class fq_codel 20:2a parent 20: \n backlog 1514b 1p\n";
        let argv: Vec<String> = "tc -s class show dev eth0"
            .split(' ')
            .map(String::from)
            .collect();
        let out = merge(&argv, &[answer(c0, l.clone()), answer(c1, l.clone())]);
        assert_eq!(
            out.stdout,
            "class mq 7fff:1 root leaf 1: \n Sent 3000 bytes\nclass mq 7fff:2 root leaf 2: \n Sent 5000 bytes\n\
class htb 2:10 root leaf 20: prio 0 rate 1Mbit\n Sent 5000 bytes\nclass htb 1:10 root prio 0 rate 1Mbit\n Sent 3000 bytes\n\
class fq_codel 20:2a parent 20: \n backlog 1514b 1p\n"
        );
        // In the order the engine lists its qdiscs (as one engine's show would be).
        assert_eq!(
            l.iter().find(|l| l.dev == "eth0").unwrap().order,
            vec![0x7fff, 2, 1, 0x20]
        );
        // Classes: 1:10 from queue 0, 2:10 from queue 1, the mq classes by their minor.
        for (header, want) in [
            ("class mq 7fff:1 root leaf 1: ", Owner::Queue(0)),
            ("class mq 7fff:2 root leaf 2: ", Owner::Queue(1)),
            (
                "class htb 2:10 root leaf 20: prio 0 rate 1Mbit",
                Owner::Queue(1),
            ),
            (
                "qdisc fq_codel 20: parent 2:10 limit 10240p",
                Owner::Queue(1),
            ),
            (
                "filter parent 1: protocol ip pref 1 u32 chain 0 ",
                Owner::Queue(0),
            ),
            ("qdisc mq 7fff: root ", Owner::Sum),
        ] {
            assert_eq!(
                Ident::from_header(header).owner(&l, Some("eth0")),
                want,
                "{header}"
            );
        }
    }

    /// `tc -s filter show dev eth0 parent 2:` lists the filters without `parent 2:` (tc prints a
    /// filter's parent only when it differs from the one asked for): they are still queue 1's, whose
    /// engine counted the hits, not queue 0's idle copy — as text and as JSON.
    #[test]
    fn a_filter_show_naming_its_parent_comes_from_that_parents_queue() {
        let l = layout(&two_queues(&[
            "qdisc add dev eth0 root handle 7fff: mq",
            "qdisc add dev eth0 parent 7fff:1 handle 1: htb default 10",
            "qdisc add dev eth0 parent 7fff:2 handle 2: htb default 10",
        ]));
        let text = |hits: u32| {
            format!(
                "filter protocol ip pref 1 u32 chain 0 \nfilter protocol ip pref 1 u32 chain 0 fh 800::800 \
order 2048 key ht 800 bkt 0 flowid 2:10 not_in_hw (rule hit {hits} success {hits})\n  match 00001451/0000ffff at 20 \
(success {hits} ) \n"
            )
        };
        let argv: Vec<String> = "tc -s filter show dev eth0 parent 2:"
            .split(' ')
            .map(String::from)
            .collect();
        let out = merge(
            &argv,
            &[answer(&text(0), l.clone()), answer(&text(7), l.clone())],
        );
        assert_eq!(out.stdout, text(7));
        let json = |hits: u32| {
            format!("[{{\"protocol\":\"ip\",\"pref\":1,\"kind\":\"u32\",\"chain\":0,\"options\":{{\"flowid\":\"2:10\",\"hits\":{hits}}}}}]")
        };
        let argv: Vec<String> = "tc -s -j filter show dev eth0 parent 2:"
            .split(' ')
            .map(String::from)
            .collect();
        let out = merge(
            &argv,
            &[answer(&json(0), l.clone()), answer(&json(7), l.clone())],
        );
        assert!(out.stdout.contains("\"hits\":7"), "{}", out.stdout);
        // A filter of the first queue's HTB, asked for by its parent, stays the first queue's.
        let argv: Vec<String> = "tc -s filter show dev eth0 parent 1:"
            .split(' ')
            .map(String::from)
            .collect();
        let out = merge(&argv, &[answer(&text(3), l.clone()), answer(&text(0), l)]);
        assert_eq!(out.stdout, text(3));
    }

    #[test]
    fn changes_that_would_undo_the_split_are_refused() {
        let call = |line: &str| -> Vec<String> { line.split(' ').map(String::from).collect() };
        assert!(
            unsplittable(&call("tc qdisc add dev eth0 root handle 1: htb"), None, 2)
                .unwrap()
                .contains("the root must stay mq")
        );
        assert!(
            unsplittable(&call("tc qdisc add dev eth0 handle ffff: ingress"), None, 2).is_some()
        );
        assert_eq!(
            unsplittable(
                &call("tc qdisc replace dev eth0 root handle 7fff: mq"),
                None,
                2
            ),
            None
        );
        assert_eq!(
            unsplittable(
                &call("tc class change dev eth0 parent 1: classid 1:10 htb rate 2mbit"),
                None,
                2
            ),
            None
        );
        assert_eq!(
            unsplittable(&call("tc -s qdisc show dev eth0"), None, 2),
            None
        );
        let batch = "qdisc add dev eth0 parent 7fff:1 handle 1: htb\nqdisc add dev eth1 root tbf rate 1mbit burst 10k latency 50ms\n";
        assert!(unsplittable(&call("tc -batch -"), Some(batch), 2)
            .unwrap()
            .ends_with("Command failed -:2"));
    }

    #[test]
    fn policies_that_cannot_be_split_over_queues_are_refused() {
        let policy = |lines: &[&str]| {
            let mut e = Engine::new();
            for d in ["eth0", "eth1"] {
                tclab_tc::store::apply_record(
                    &mut e,
                    &["link", "add", "dev", d, "numtxqueues", "2"].map(String::from),
                )
                .unwrap();
            }
            for l in lines {
                let w: Vec<String> = l.split_whitespace().map(String::from).collect();
                if w[0] == "link" {
                    tclab_tc::store::apply_record(&mut e, &w).unwrap();
                } else {
                    assert_eq!(tclab_tc::run(&mut e, &w, 0).code, 0, "{l}");
                }
            }
            e
        };
        let ports = ["eth0".to_string(), "eth1".to_string()];
        let mq = policy(&[
            "qdisc add dev eth0 root handle 7fff: mq",
            "qdisc add dev eth0 parent 7fff:1 handle 1: htb",
        ]);
        assert_eq!(refuse(&mq, &ports, 2), None);
        let htb = policy(&["qdisc add dev eth0 root handle 1: htb"]);
        assert!(refuse(&htb, &ports, 2)
            .unwrap()
            .contains("eth0's root is htb 1:"));
        assert_eq!(refuse(&htb, &ports, 1), None);
        let ingress = policy(&["qdisc add dev eth1 handle ffff: ingress"]);
        assert!(refuse(&ingress, &ports, 2)
            .unwrap()
            .contains("eth1 has an ingress qdisc"));
        let ifb = policy(&["link add dev ifb0 type ifb"]);
        assert!(refuse(&ifb, &ports, 2).unwrap().contains("ifb0, an ifb"));
        // A tree for one queue of two: the other's flows go through mq's default pfifo_fast.
        assert_eq!(
            unshaped_queues(&mq, &ports),
            ["eth0: mq's class 7fff:2 keeps the default qdisc while the policy gives the other queues trees of their own: flows hashed to it are not shaped"]
        );
        let both = policy(&[
            "qdisc add dev eth0 root handle 7fff: mq",
            "qdisc add dev eth0 parent 7fff:1 handle 1: htb",
            "qdisc add dev eth0 parent 7fff:2 handle 2: htb",
        ]);
        assert!(unshaped_queues(&both, &ports).is_empty());
    }
}
