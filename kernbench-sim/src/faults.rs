//! Faults: a link, a NIC or a PE that slows down by a factor, or fails, from a time on.
//!
//! A fault is one line of text, `PART:EFFECT[@TIME]`:
//!
//! - `link=A-B` (both directions) or `link=A>B` (from `A` to `B` only), where an end is a SIP `S`
//!   (its (cube 0, PE 0), where it attaches to the SIP interconnect), a PE `S.C.P`, `switch` (the
//!   switch of a system of one node), `switch.K` (node `K`'s), `nic.N.R` or `network`;
//! - `nic=N.R`: every channel into and out of the NIC of rail `R` of node `N`;
//! - `pe=S.C.P`: a PE's engines (its injections, reductions, loads and stores).
//!
//! The effect is `slow=F` (`F` times as long per byte or element, `F` >= 1) or `fail`, from `TIME`
//! (`ns` when no unit is given; `us`, `ms`, `s`; 0 when there is no `@`). So `link=3-4:fail@120us`
//! cuts the link between SIPs 3 and 4 from 120 us on.
//!
//! How the timing model treats them ([`Timing::faults`](crate::Timing::faults)):
//!
//! - A slow channel carries a transfer that reaches it at or after the fault's time at `1 / F` of
//!   its bandwidth (its latency is unchanged); a slow PE takes `F` times as long for work it starts
//!   at or after it. A PE slowed from time 0 is a [`Straggler`](crate::Straggler) whose rates are
//!   divided by `F` and whose injections take `F` times as long.
//! - A failed channel carries no transfer that leaves its sender at or after the fault's time: the
//!   transfer takes the shortest route round every failed channel
//!   ([`System::route_avoiding`](kernbench_core::System::route_avoiding)), and when failed links cut
//!   the receiver off, the run ends with [`RunError::Unreachable`], naming the failed links, the
//!   ranks and the time. A transfer already on its way when a link fails arrives.
//! - A failed PE stops at the fault's time: a run in which its kernel had not finished by then ends
//!   with [`RunError::PeFailed`].
//!
//! Faults are decided by simulated time, in the fixed order transfers are placed, so a faulted run is
//! the same at any thread and process count.

use std::fmt;
use std::str::FromStr;

use kernbench_core::route::{Channel, Node, Route};
use kernbench_core::{PeId, System};
use serde::{Deserialize, Serialize};

use crate::error::{Cut, RunError};

/// A link, a NIC or a PE that slows down or fails from a time on.
///
/// Its text form is `PART:EFFECT[@TIME]`: the part `link=A-B` (both directions) or `link=A>B`
/// (one), where an end is a SIP `S` (its (cube 0, PE 0)), a PE `S.C.P`, `switch`, `switch.K`,
/// `nic.N.R` or `network`; `nic=N.R` (node `N`'s NIC of rail `R`); or `pe=S.C.P`. The effect is
/// `slow=F` (`F` >= 1 times as long) or `fail`, from `TIME` (`ns` unless `us`, `ms` or `s` follows;
/// 0 without `@`). `Display` writes it back with the time in ns. How the timing model treats
/// faults is on [`Timing::faults`](crate::Timing::faults).
///
/// # Examples
/// ```
/// use kernbench_sim::{Effect, Fault, Part};
/// let fault: Fault = "link=3-4:fail@120us".parse().unwrap();
/// assert_eq!(fault.effect, Effect::Fail);
/// assert_eq!(fault.at_ns, 120_000.0);
/// assert!(matches!(fault.part, Part::Link { both: true, .. }));
/// assert_eq!(fault.to_string(), "link=3-4:fail@120000ns");
/// let error = "link=3-4:fial".parse::<Fault>().unwrap_err();
/// assert_eq!(error.to_string(), "fault `link=3-4:fial`: `fial` is not an effect: expected `fail` or `slow=FACTOR`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Fault {
    /// What slows down or fails.
    pub part: Part,
    /// From when, in ns of simulated time.
    pub at_ns: f64,
    /// How.
    pub effect: Effect,
}

/// The part of the machine a [`Fault`] strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The channel from `a` to `b`, and with `both` the one back.
    Link {
        /// One end.
        a: Node,
        /// The other.
        b: Node,
        /// Both directions, or only `a` to `b`.
        both: bool,
    },
    /// Every channel into and out of a NIC.
    Nic {
        /// The node.
        node: u32,
        /// The rail.
        rail: u32,
    },
    /// A PE's engines.
    Pe(PeId),
}

/// What a [`Fault`] does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Effect {
    /// Everything takes this many times as long (at least 1).
    Slow(f64),
    /// Nothing gets through.
    Fail,
}

/// A fault's text that does not read as one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("fault `{text}`: {why}")]
pub struct FaultSyntaxError {
    /// The text.
    pub text: String,
    /// What is wrong with it, and what would be valid.
    pub why: String,
}

impl Part {
    /// Whether the fault strikes `channel` (never, for a PE's).
    pub fn touches(&self, channel: &Channel) -> bool {
        match *self {
            Part::Link { a, b, both } => {
                (channel.from, channel.to) == (a, b) || both && (channel.from, channel.to) == (b, a)
            }
            Part::Nic { node, rail } => {
                let nic = Node::Nic { node, rail };
                channel.from == nic || channel.to == nic
            }
            Part::Pe(_) => false,
        }
    }
}

impl Fault {
    /// Whether it makes its part fail (rather than slow down).
    pub fn fails(&self) -> bool {
        self.effect == Effect::Fail
    }

    /// The factor its part is slowed by at `t` ns: 1 before the fault's time or for a failure.
    pub(crate) fn slowdown_at(&self, t: f64) -> f64 {
        match self.effect {
            Effect::Slow(factor) if t >= self.at_ns => factor,
            _ => 1.0,
        }
    }

    /// Checks the fault against `system`: its part is there (a link's ends are joined by a link), its
    /// factor is finite and at least 1, its time from 0 to [`System::MAX_TIME_NS`].
    ///
    /// # Errors
    /// [`RunError::BadFault`] saying which and what would be valid.
    pub fn check(&self, system: &System) -> Result<(), RunError> {
        let bad = |why: String| Err(RunError::BadFault { fault: self.to_string(), why });
        if !(0.0..=System::MAX_TIME_NS).contains(&self.at_ns) {
            return bad(format!("its time is {} ns: expected 0 to {:e} ns", self.at_ns, System::MAX_TIME_NS));
        }
        if let Effect::Slow(factor) = self.effect
            && !(factor.is_finite() && factor >= 1.0)
        {
            return bad(format!("its factor is {factor}: expected a finite number of at least 1"));
        }
        match self.part {
            Part::Link { a, b, .. } => {
                let links = system.links_from(a);
                if !links.iter().any(|c| c.to == b) {
                    let ends: Vec<String> = links.iter().map(|c| end_text(c.to)).collect();
                    let joined = if ends.is_empty() { "none".to_owned() } else { ends.join(", ") };
                    let (a, b) = (end_text(a), end_text(b));
                    return bad(format!(
                        "no link joins {a} and {b} in {}: links from {a} go to {joined}",
                        system.describe()
                    ));
                }
            }
            Part::Nic { node, rail } => {
                let (nodes, nics) = (system.nodes(), system.nics_per_node());
                if node as usize >= nodes || rail as usize >= nics || nodes < 2 {
                    return bad(format!(
                        "{} has no NIC {node}.{rail}: expected nodes 0..{nodes} (with 2 or more) and rails 0..{nics}",
                        system.describe()
                    ));
                }
            }
            Part::Pe(pe) => {
                if !system.contains(pe) {
                    return bad(format!("{} has no PE {pe}", system.describe()));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            Part::Link { a, b, both } => {
                write!(f, "link={}{}{}", end_text(a), if both { '-' } else { '>' }, end_text(b))?
            }
            Part::Nic { node, rail } => write!(f, "nic={node}.{rail}")?,
            Part::Pe(pe) => write!(f, "pe={}.{}.{}", pe.sip, pe.cube, pe.pe)?,
        }
        match self.effect {
            Effect::Slow(factor) => write!(f, ":slow={factor}")?,
            Effect::Fail => f.write_str(":fail")?,
        }
        write!(f, "@{}ns", self.at_ns)
    }
}

/// How a link's end is written: a SIP's attachment PE as its number.
fn end_text(node: Node) -> String {
    match node {
        Node::Pe(pe) if pe.cube == 0 && pe.pe == 0 => pe.sip.to_string(),
        Node::Pe(pe) => format!("{}.{}.{}", pe.sip, pe.cube, pe.pe),
        Node::Switch => "switch".to_owned(),
        Node::NodeSwitch(k) => format!("switch.{k}"),
        Node::Nic { node, rail } => format!("nic.{node}.{rail}"),
        Node::Network => "network".to_owned(),
    }
}

impl FromStr for Fault {
    type Err = FaultSyntaxError;

    fn from_str(text: &str) -> Result<Fault, FaultSyntaxError> {
        let error = |why: String| FaultSyntaxError { text: text.to_owned(), why };
        let (body, at_ns) = match text.split_once('@') {
            Some((body, time)) => (body, parse_ns(time).map_err(error)?),
            None => (text, 0.0),
        };
        let Some((part, effect)) = body.split_once(':') else {
            return Err(error("expected PART:EFFECT[@TIME], as `link=3-4:fail@120us`".to_owned()));
        };
        let effect = match effect.split_once('=') {
            None if effect == "fail" => Effect::Fail,
            Some(("slow", factor)) => {
                let factor =
                    factor.parse().map_err(|_| error(format!("`{factor}` is not a factor: expected a number")))?;
                Effect::Slow(factor)
            }
            _ => return Err(error(format!("`{effect}` is not an effect: expected `fail` or `slow=FACTOR`"))),
        };
        let part = match part.split_once('=') {
            Some(("link", ends)) => {
                let (a, b, both) = match (ends.split_once('-'), ends.split_once('>')) {
                    (Some((a, b)), None) => (a, b, true),
                    (None, Some((a, b))) => (a, b, false),
                    _ => return Err(error(format!("`{ends}` is not a link: expected `A-B` or `A>B`, as `3-4`"))),
                };
                Part::Link { a: parse_end(a).map_err(error)?, b: parse_end(b).map_err(error)?, both }
            }
            Some(("nic", nic)) => match numbers::<2>(nic) {
                Some([node, rail]) => Part::Nic { node, rail },
                None => return Err(error(format!("`{nic}` is not a NIC: expected NODE.RAIL, as `0.1`"))),
            },
            Some(("pe", pe)) => match numbers::<3>(pe) {
                Some([sip, cube, pe]) => Part::Pe(PeId::new(sip, cube, pe)),
                None => return Err(error(format!("`{pe}` is not a PE: expected SIP.CUBE.PE, as `3.0.0`"))),
            },
            _ => return Err(error(format!("`{part}` is not a part: expected `link=A-B`, `nic=N.R` or `pe=S.C.P`"))),
        };
        Ok(Fault { part, at_ns, effect })
    }
}

/// `N` numbers joined by dots.
fn numbers<const N: usize>(text: &str) -> Option<[u32; N]> {
    let mut out = [0; N];
    let mut parts = text.split('.');
    for slot in &mut out {
        *slot = parts.next()?.trim().parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn parse_end(text: &str) -> Result<Node, String> {
    let text = text.trim();
    let node = match text {
        "switch" => Some(Node::Switch),
        "network" => Some(Node::Network),
        _ => match text.split_once('.') {
            Some(("switch", k)) => k.parse().ok().map(Node::NodeSwitch),
            Some(("nic", nic)) => numbers::<2>(nic).map(|[node, rail]| Node::Nic { node, rail }),
            _ => numbers::<1>(text)
                .map(|[sip]| Node::Pe(PeId::new(sip, 0, 0)))
                .or_else(|| numbers::<3>(text).map(|[s, c, p]| Node::Pe(PeId::new(s, c, p)))),
        },
    };
    node.ok_or_else(|| {
        format!("`{text}` is not a link's end: expected a SIP `S`, a PE `S.C.P`, `switch`, `switch.K`, `nic.N.R` or `network`")
    })
}

/// A time: a number with `ns`, `us`, `ms` or `s` (`ns` when none).
fn parse_ns(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let scale = match &text[digits.len()..] {
        "" | "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        unit => return Err(format!("`{unit}` is not a unit of time: expected ns, us, ms or s")),
    };
    match digits.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value * scale),
        _ => Err(format!("`{text}` is not a time: expected a number of ns, us, ms or s, as `120us`")),
    }
}

impl TryFrom<String> for Fault {
    type Error = FaultSyntaxError;

    fn try_from(text: String) -> Result<Fault, FaultSyntaxError> {
        text.parse()
    }
}

impl From<Fault> for String {
    fn from(fault: Fault) -> String {
        fault.to_string()
    }
}

/// The faults of one PE, on its lanes' clocks.
#[derive(Clone, Debug)]
pub(crate) struct PeFaults {
    slow: Vec<Fault>,
    /// The earliest failure, if it fails.
    fails: Option<Fault>,
}

impl PeFaults {
    /// The faults of `pe` among `faults`, if it has any.
    pub(crate) fn of(faults: &[Fault], pe: PeId) -> Option<PeFaults> {
        let mine = faults.iter().filter(|f| f.part == Part::Pe(pe));
        let (fails, slow): (Vec<Fault>, Vec<Fault>) = mine.partition(|f| f.fails());
        let fails = fails.into_iter().min_by(|a, b| a.at_ns.total_cmp(&b.at_ns));
        (fails.is_some() || !slow.is_empty()).then_some(PeFaults { slow, fails })
    }

    /// How many times as long work started at `t` takes.
    pub(crate) fn slowdown_at(&self, t: f64) -> f64 {
        self.slow.iter().map(|f| f.slowdown_at(t)).product()
    }

    /// The failure a lane whose clock reads `now` has met, if it has met one.
    pub(crate) fn failed_by(&self, now: f64) -> Option<&Fault> {
        self.fails.as_ref().filter(|f| now >= f.at_ns)
    }
}

/// Which route a message takes over a network with failed links.
pub(crate) enum Detour {
    /// Its queue's own: nothing on it has failed.
    Own,
    /// A way round, found before (channel ids).
    Known(Vec<u32>),
    /// A way round, found now (to be interned, then remembered under its key).
    New(DetourKey, Route),
}

/// A detour is the same for every message of a queue while the same links have failed: the queue,
/// and how many failures have begun.
pub(crate) type DetourKey = (u32, usize);

/// The network's slow and failed links and NICs.
pub(crate) struct LinkFaults {
    pub(crate) system: System,
    pes: Vec<PeId>,
    faults: Vec<Fault>,
    /// When each failure begins, sorted: how many have begun by `t` names the set failed at `t`.
    fail_times: Vec<f64>,
    /// Per queue, its sender's and receiver's ranks.
    pub(crate) ends: Vec<(u32, u32)>,
    /// Every channel's id.
    pub(crate) index: rustc_hash::FxHashMap<Channel, u32>,
    /// Per channel id, the faults (indices) that strike it.
    touched: Vec<Vec<u16>>,
    detours: rustc_hash::FxHashMap<DetourKey, Vec<u32>>,
}

impl LinkFaults {
    /// The link and NIC faults among `faults`, for a run of `pes` on `system`, if there are any.
    pub(crate) fn of(system: &System, faults: &[Fault], pes: &[PeId]) -> Option<Box<LinkFaults>> {
        let faults: Vec<Fault> = faults.iter().filter(|f| !matches!(f.part, Part::Pe(_))).copied().collect();
        if faults.is_empty() {
            return None;
        }
        let mut fail_times: Vec<f64> = faults.iter().filter(|f| f.fails()).map(|f| f.at_ns).collect();
        fail_times.sort_by(f64::total_cmp);
        Some(Box::new(LinkFaults {
            system: system.clone(),
            pes: pes.to_vec(),
            faults,
            fail_times,
            ends: Vec::new(),
            index: rustc_hash::FxHashMap::default(),
            touched: Vec::new(),
            detours: rustc_hash::FxHashMap::default(),
        }))
    }

    /// Notes a channel added to the network as `id` (the next), and the faults that strike it: a
    /// detour over it later finds it, so that everything crossing one link shares it.
    pub(crate) fn add_channel(&mut self, channel: Channel, id: u32) {
        let touching = self.faults.iter().enumerate().filter(|(_, f)| f.part.touches(&channel));
        self.touched.push(touching.map(|(i, _)| i as u16).collect());
        self.index.insert(channel, id);
    }

    /// How many times as long a transfer reaching channel `id` at `t` takes to cross it.
    pub(crate) fn slowdown(&self, id: u32, t: f64) -> f64 {
        self.touched[id as usize].iter().map(|&f| self.faults[f as usize].slowdown_at(t)).product()
    }

    fn dead(&self, id: u32, t: f64) -> bool {
        self.touched[id as usize].iter().any(|&f| self.faults[f as usize].fails() && self.faults[f as usize].at_ns <= t)
    }

    /// The failures begun by `t`, as text.
    fn failed_by(&self, t: f64) -> Vec<String> {
        self.faults.iter().filter(|f| f.fails() && f.at_ns <= t).map(Fault::to_string).collect()
    }

    /// The route of a message leaving on `queue` (whose own route is channels `own`) at `depart`.
    ///
    /// # Errors
    /// [`RunError::Unreachable`] when failed links cut its receiver off.
    pub(crate) fn detour(&mut self, queue: u32, depart: f64, own: &[u32]) -> Result<Detour, RunError> {
        let begun = self.fail_times.partition_point(|&t| t <= depart);
        if begun == 0 || !own.iter().any(|&id| self.dead(id, depart)) {
            return Ok(Detour::Own);
        }
        if let Some(ids) = self.detours.get(&(queue, begun)) {
            return Ok(Detour::Known(ids.clone()));
        }
        let (sender, receiver) = self.ends[queue as usize];
        let (from, to) = (self.pes[sender as usize], self.pes[receiver as usize]);
        let faults = &self.faults;
        let dead = |c: &Channel| faults.iter().any(|f| f.fails() && f.at_ns <= depart && f.part.touches(c));
        match self.system.route_avoiding(from, to, dead) {
            Ok(route) => Ok(Detour::New((queue, begun), route)),
            Err(reached) => {
                let cut_off =
                    (0..self.pes.len() as u32).filter(|&r| !reached.contains(&Node::Pe(self.pes[r as usize])));
                Err(RunError::Unreachable(Box::new(Cut {
                    from_rank: sender,
                    from,
                    to_rank: receiver,
                    to,
                    at_ns: format!("{depart:.0}"),
                    failed: self.failed_by(depart),
                    cut_off: cut_off.collect(),
                })))
            }
        }
    }

    /// Remembers a detour found now, as channel ids.
    pub(crate) fn remember(&mut self, key: DetourKey, ids: Vec<u32>) {
        self.detours.insert(key, ids);
    }

    /// Refuses a switch's leg (channel `id` of `queue`) that has failed by `depart`: it has no other way.
    pub(crate) fn check_leg(&self, queue: u32, id: u32, depart: f64) -> Result<(), RunError> {
        if !self.dead(id, depart) {
            return Ok(());
        }
        let (sender, receiver) = self.ends[queue as usize];
        let cut_off = vec![receiver];
        Err(RunError::Unreachable(Box::new(Cut {
            from_rank: sender,
            from: self.pes[sender as usize],
            to_rank: receiver,
            to: self.pes[receiver as usize],
            at_ns: format!("{depart:.0}"),
            failed: self.failed_by(depart),
            cut_off,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_and_effect_reads_and_writes_back() {
        for text in [
            "link=3-4:fail@0ns",
            "link=3>4:slow=2@1500ns",
            "link=0.1.2-0.1.3:slow=1.5@0ns",
            "link=2-switch:fail@0ns",
            "link=nic.0.1-network:fail@5ns",
            "link=switch.1-nic.1.0:fail@0ns",
            "nic=1.3:slow=4@0ns",
            "pe=2.0.1:fail@1000000ns",
        ] {
            let fault: Fault = text.parse().unwrap();
            assert_eq!(fault.to_string(), text);
        }
        assert_eq!("pe=1.0.0:fail@2ms".parse::<Fault>().unwrap().at_ns, 2e6);
        assert_eq!("pe=1.0.0:fail".parse::<Fault>().unwrap().at_ns, 0.0);
    }

    #[test]
    fn text_that_is_not_a_fault_says_what_would_be() {
        for (text, says) in [
            ("link=3-4", "expected PART:EFFECT[@TIME]"),
            ("wire=3-4:fail", "`wire=3-4` is not a part"),
            ("link=3+4:fail", "`3+4` is not a link"),
            ("link=3-x:fail", "`x` is not a link's end"),
            ("link=3-4:slow=fast", "`fast` is not a factor"),
            ("link=3-4:fail@10 weeks", "`weeks` is not a unit of time"),
            ("link=3-4:fail@soon", "`soon` is not a unit of time"),
            ("nic=1:fail", "`1` is not a NIC"),
            ("pe=1.2:fail", "`1.2` is not a PE"),
        ] {
            let error = text.parse::<Fault>().unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
