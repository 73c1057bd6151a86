//! Fitting a system to measured times: the figures a log constrains ([`Knob`]), moved one at a time
//! until the simulated times are as close to the measured ones as they get.
//!
//! Uses [`super::compare`] for the errors it minimises; the simulating is the caller's ([`fit`] takes
//! a function from a system to its simulated times), so one search serves any way of running calls.
//!
//! What is minimised is the mean of `ln(simulated / measured)^2` over every judged (not
//! [noisy](super::LogRow::noisy)) row of every log: a relative error, the same weight for a 10 % miss
//! at 8 bytes as at 8 GiB, and symmetric in too slow and too fast; plus a small pull of every knob
//! towards its base value ([`PRIOR_WEIGHT`]), so that what the logs do not constrain stays as published. The search is coordinate descent in
//! log space: each knob in turn is multiplied and divided by a factor and keeps whichever lowers the
//! objective; the factor shrinks from 2 to 1.01 when no knob moves. It is deterministic: the same logs
//! and base give the same fitted system.

use std::fmt;

use kernbench_core::{LinkClass, Protocol, System, SystemSpec};

use super::compare::Compared;

/// One figure of a system spec that a fit may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Knob {
    /// `call.launch_ns`.
    Launch,
    /// `call.launch_per_gpu_ns`.
    LaunchPerGpu,
    /// `links.<class>.latency_ns`.
    Latency(LinkClass),
    /// `links.<class>.bandwidth_gbps`.
    Bandwidth(LinkClass),
    /// `links.<class>.step_ns.<protocol>`.
    Step(LinkClass, Protocol),
    /// `protocols.<protocol>.lane_gbps`.
    LaneCap(Protocol),
    /// `protocols.<protocol>.pe_gbps`.
    PeCap(Protocol),
}

impl Knob {
    /// The knob's value in `spec`; `None` where the spec does not give it (a protocol it lacks, a lane
    /// cap it leaves out).
    pub fn get(self, spec: &SystemSpec) -> Option<f64> {
        match self {
            Knob::Launch => Some(spec.call.launch_ns),
            Knob::LaunchPerGpu => Some(spec.call.launch_per_gpu_ns),
            Knob::Latency(class) => Some(spec.link(class)?.latency_ns),
            Knob::Bandwidth(class) => Some(spec.link(class)?.bandwidth_gbps),
            Knob::Step(class, protocol) => {
                spec.protocols?.get(protocol)?;
                Some(spec.link(class)?.step_ns.get(protocol))
            }
            Knob::LaneCap(protocol) => spec.protocols?.get(protocol)?.lane_gbps,
            Knob::PeCap(protocol) => spec.protocols?.get(protocol)?.pe_gbps,
        }
    }

    /// Sets the knob in `spec` (where [`Knob::get`] has a value; elsewhere it does nothing).
    pub fn set(self, spec: &mut SystemSpec, value: f64) {
        match self {
            Knob::Launch => spec.call.launch_ns = value,
            Knob::LaunchPerGpu => spec.call.launch_per_gpu_ns = value,
            Knob::Latency(class) => spec.link_mut(class).into_iter().for_each(|link| link.latency_ns = value),
            Knob::Bandwidth(class) => spec.link_mut(class).into_iter().for_each(|link| link.bandwidth_gbps = value),
            Knob::Step(class, protocol) => {
                spec.link_mut(class).into_iter().for_each(|link| *link.step_ns.get_mut(protocol) = value);
            }
            Knob::LaneCap(protocol) | Knob::PeCap(protocol) => {
                if let Some(Some(figures)) = spec.protocols.as_mut().map(|p| p.get_mut(protocol)) {
                    *(if matches!(self, Knob::LaneCap(_)) { &mut figures.lane_gbps } else { &mut figures.pe_gbps }) =
                        Some(value);
                }
            }
        }
    }

    /// The smallest step a time knob at 0 starts from, in its unit: the search is multiplicative, so a
    /// time of 0 first tries this.
    fn floor(self) -> f64 {
        match self {
            Knob::Bandwidth(_) | Knob::LaneCap(_) | Knob::PeCap(_) => System::MIN_RATE,
            Knob::Launch | Knob::LaunchPerGpu | Knob::Latency(_) | Knob::Step(..) => 100.0,
        }
    }

    /// The knobs logs of calls whose messages cross `classes` constrain on `system`, run with each of
    /// `gpus_per_thread` GPUs a host thread (nccl-tests' `-g`): the launch of a GPU's own thread (from a
    /// log run with 1) and of each further GPU of a thread (from one run with more); per class, its
    /// bandwidth and either its protocols' step costs (a system with protocols) or its latency (one
    /// without); and each protocol's lane and PE caps the system gives. A protocol's base latency is
    /// not among them: every call pays it with the launch, so the two cannot be told apart.
    pub fn constrained(system: &System, classes: &[LinkClass], gpus_per_thread: &[usize]) -> Vec<Knob> {
        let spec = system.spec();
        let mut knobs = Vec::new();
        if gpus_per_thread.iter().any(|&g| g <= 1) {
            knobs.push(Knob::Launch);
        }
        if gpus_per_thread.iter().any(|&g| g > 1) {
            knobs.push(Knob::LaunchPerGpu);
        }
        for &class in classes {
            knobs.push(Knob::Bandwidth(class));
            match &spec.protocols {
                Some(protocols) => knobs.extend(protocols.given().map(|p| Knob::Step(class, p))),
                None => knobs.push(Knob::Latency(class)),
            }
        }
        if let Some(protocols) = &spec.protocols {
            for cap in protocols.given().flat_map(|p| [Knob::LaneCap(p), Knob::PeCap(p)]) {
                if cap.get(spec).is_some() {
                    knobs.push(cap);
                }
            }
        }
        knobs
    }
}

impl fmt::Display for Knob {
    /// The knob's path in a system spec, as `SpecError` names fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Knob::Launch => f.write_str("call.launch_ns"),
            Knob::LaunchPerGpu => f.write_str("call.launch_per_gpu_ns"),
            Knob::Latency(class) => write!(f, "links.{class}.latency_ns"),
            Knob::Bandwidth(class) => write!(f, "links.{class}.bandwidth_gbps"),
            Knob::Step(class, protocol) => write!(f, "links.{class}.step_ns.{}", protocol.key()),
            Knob::LaneCap(protocol) => write!(f, "protocols.{}.lane_gbps", protocol.key()),
            Knob::PeCap(protocol) => write!(f, "protocols.{}.pe_gbps", protocol.key()),
        }
    }
}

/// A knob's value before and after a fit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moved {
    /// The knob.
    pub knob: Knob,
    /// Its value in the base system.
    pub before: f64,
    /// Its value in the fitted one.
    pub after: f64,
}

/// What a fit found.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The fitted system: the base with the knobs moved.
    pub system: System,
    /// Every knob, before and after.
    pub moved: Vec<Moved>,
    /// The objective (mean squared log error of the judged rows) of the base system.
    pub before: f64,
    /// The objective of the fitted one.
    pub after: f64,
    /// Systems simulated in the search.
    pub evaluations: usize,
}

/// The weight of a knob's departure from the base: the search minimises the objective plus this times
/// the mean over the knobs of `ln(fitted / base)^2`. The base's figures are published constants (NCCL's
/// latencies and caps, the links' rates), so a fit leaves them where the logs do not ask for a move: a
/// knob is moved by a factor `e^x` only when that lowers the objective by more than this times `x^2`
/// over the knobs. 0.002 lets a knob move 2.7x for a gain of 0.0003 in a mean squared log error of
/// a few 0.001 (a 1 % better fit), so the logs still decide, but a knob the logs barely see keeps its
/// published value.
const PRIOR_WEIGHT: f64 = 0.002;

/// The factors the search multiplies knobs by, largest first.
const FACTORS: [f64; 5] = [2.0, 1.4, 1.15, 1.05, 1.01];

/// The most passes over the knobs at one factor: a bound on the search's work, far above what the
/// shipped logs need (two or three).
const MAX_PASSES: usize = 12;

/// `value` to [`SIGNIFICANT_DIGITS`] significant digits: a fitted figure says no more than the fit
/// can tell (its smallest factor is 1 %), and a fitted file reads as a person would write it.
fn significant(value: f64) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let scale = 10f64.powi(SIGNIFICANT_DIGITS - 1 - value.abs().log10().floor() as i32);
    (value * scale).round() / scale
}

/// The significant digits a fitted figure keeps.
const SIGNIFICANT_DIGITS: i32 = 4;

/// The objective of `compared`: the mean of `ln(simulated / measured)^2` over the judged rows;
/// `None` when no row is judged.
///
/// # Examples
/// ```
/// use kernbench::calibrate::{Compared, LogRow, Measured, objective};
/// let row = LogRow {
///     line: 1, size: 1024, count: 256, dtype: "float".into(), op: "sum".into(),
///     out_of_place: Measured { time_us: 10.0, algbw_gbps: 0.1, busbw_gbps: 0.2 }, in_place: None,
/// };
/// let exact = [Compared { measured: &row, simulated_ns: 10_000.0 }];
/// assert_eq!(objective(&exact), Some(0.0));
/// let twice = [Compared { measured: &row, simulated_ns: 20_000.0 }];
/// assert!((objective(&twice).unwrap() - 2f64.ln().powi(2)).abs() < 1e-12);
/// ```
pub fn objective(compared: &[Compared<'_>]) -> Option<f64> {
    let judged: Vec<f64> = compared
        .iter()
        .filter(|c| !c.measured.noisy())
        .map(|c| (c.simulated_ns / c.measured.time_ns()).ln().powi(2))
        .collect();
    (!judged.is_empty()).then(|| judged.iter().sum::<f64>() / judged.len() as f64)
}

/// Fits `knobs` of `base` so that `simulate` (a system's simulated times beside the measured ones, its
/// [`objective`]) comes as close to the measurements as it gets.
///
/// The search is coordinate descent in log space: each knob in turn is multiplied and divided by a
/// factor and keeps whichever lowers the objective plus a pull towards the base (0.002 times the mean
/// over the knobs of `ln(fitted / base)^2`, so a knob the logs barely see keeps its published value);
/// the factor shrinks from 2 to 1.01 when no knob moves, and fitted
/// values keep 4 significant digits. It is deterministic: the same logs and base give the same system.
///
/// A candidate system the spec's checks reject is never simulated, and a candidate `simulate` fails on
/// is passed over (a knob's value that makes a call impossible is no fit).
///
/// # Errors
/// What `simulate` returns for the base system.
///
/// # Examples
/// ```
/// use kernbench::calibrate::{Knob, fit};
/// use kernbench::System;
/// // A "machine" whose time is the launch plus 2 us: the fit finds the launch.
/// let base = System::builtin();
/// let fitted = fit(&base, &[Knob::Launch], |system| {
///     let t = system.call_spec().launch_ns + 2000.0;
///     Ok::<_, ()>(((t / 12_000.0).ln()).powi(2))
/// })
/// .unwrap();
/// assert!((fitted.system.call_spec().launch_ns - 10_000.0).abs() < 150.0, "{:?}", fitted.moved);
/// ```
pub fn fit<E>(base: &System, knobs: &[Knob], mut simulate: impl FnMut(&System) -> Result<f64, E>) -> Result<Fit, E> {
    let knobs: Vec<Knob> = knobs.iter().copied().filter(|k| k.get(base.spec()).is_some()).collect();
    let prior = |spec: &SystemSpec| {
        let departure = |k: &Knob| {
            let (from, to) = (k.get(base.spec()).unwrap_or(0.0), k.get(spec).unwrap_or(0.0));
            if from > 0.0 && to > 0.0 { (to / from).ln().powi(2) } else { 0.0 }
        };
        PRIOR_WEIGHT * knobs.iter().map(departure).sum::<f64>() / knobs.len().max(1) as f64
    };
    let before = simulate(base)?;
    let (mut best, mut best_score, mut best_error, mut evaluations) = (base.spec().clone(), before, before, 1);
    for factor in FACTORS {
        for _ in 0..MAX_PASSES {
            let mut moved = false;
            for &knob in &knobs {
                let value = knob.get(&best).unwrap_or(0.0);
                let candidates = if value > 0.0 { [value * factor, value / factor] } else { [knob.floor(), 0.0] };
                let candidates = candidates.map(significant);
                for candidate in candidates.into_iter().filter(|&c| c != value) {
                    let mut spec = best.clone();
                    knob.set(&mut spec, candidate);
                    let Ok(system) = System::from_spec(spec.clone()) else { continue };
                    evaluations += 1;
                    let error = simulate(&system).unwrap_or(f64::INFINITY);
                    let score = error + prior(&spec);
                    if score < best_score {
                        (best_score, best_error, moved) = (score, error, true);
                        best = spec;
                        break;
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    // Every accepted spec passed the checks: `best` is the base or a candidate that did.
    let system = System::from_spec(best).unwrap_or_else(|_| base.clone());
    let moved = knobs
        .iter()
        .map(|&knob| Moved {
            knob,
            before: knob.get(base.spec()).unwrap_or(0.0),
            after: knob.get(system.spec()).unwrap_or(0.0),
        })
        .collect();
    Ok(Fit { system, moved, before, after: best_error, evaluations })
}
