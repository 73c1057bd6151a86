//! The mock runtime's speed, each figure beside its target: per-message overhead untimed and timed, the
//! ring all-reduce's reduction bandwidth against a plain in-place add, a million-PE run on one and two
//! threads, the race detector's cost (with signals and with atomics), whole `kernbench bench` processes, and runs spread over the
//! processes of an MPI job (section `spread`, with `--features mpi`).
//!
//! `cargo bench --bench runtime` prints them. The machine's own speed comes first (a `VecDeque`
//! push+pop, memcpy, an in-place add, the first touch of fresh memory, on one core; with the million-PE
//! runs, what its two cores give two runs at once), and figures are also given as multiples of it, so
//! a noisy or slower machine can be judged by ratios measured in the same run. Timed figures are the
//! best of [`RUNS`] runs: the machine may be shared. `KERNBENCH_BENCH_QUICK=1` runs a smaller, faster
//! pass (its figures are not comparable with the targets); `KERNBENCH_BENCH_ONLY=messages,timing`
//! (also `reduce`, `race`, `state`, `million`, `cli`, `spread`) runs only those sections.

#[path = "runtime/kernels.rs"]
mod kernels;
#[path = "runtime/lines.rs"]
mod lines;
#[path = "runtime/machine.rs"]
mod machine;

use std::process::{Command, Stdio};
use std::time::Instant;

use kernbench::prelude::*;
use kernbench::sim::testing::MockRun;
use kernbench::sim::{Call, PeBuffers, Runtime, Timing};
use kernbench::{InstallPlan, KernelDef, System};
use kernels::{ping_pong, stream};
use lines::{Goal, figure};
use machine::{InPlaceAdd, Machine, machine};
use serde_json::json;

/// The allocator the `kernbench` binary runs on.
#[global_allocator]
static ALLOCATOR: kernbench_cli::memory::Allocator = kernbench_cli::memory::Allocator;

fn quick() -> bool {
    std::env::var_os("KERNBENCH_BENCH_QUICK").is_some()
}

fn time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

/// Runs `f` (which returns what to minimise) this many times and keeps the best: the machine is
/// shared, and the best run is the one least disturbed.
const RUNS: usize = 3;

fn best_of(mut f: impl FnMut() -> f64) -> f64 {
    (0..RUNS).map(|_| f()).fold(f64::INFINITY, f64::min)
}

const GIB: f64 = (1u64 << 30) as f64;

/// This process's peak resident memory, in GiB.
fn peak_rss_gib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib * 1024.0 / GIB)
}

/// The two-PE system the message figures run on, with queues `depth` deep.
fn two_pes(depth: usize) -> System {
    let spec = json!({"sips": 1, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 2, "ipcq_depth": depth});
    System::from_json_str(&spec.to_string()).unwrap()
}

/// `kernel` sending `count` messages on `system`, under `timing`.
fn message_run<'a>(system: &'a System, kernel: &'a KernelDef, count: u64, timing: Option<Timing>) -> MockRun<'a> {
    MockRun::new(system, "ring_1d", "all_pes", kernel).params(json!({ "count": count })).timing(timing)
}

/// ns per message of one run of `run`.
fn ns_per_message(run: &MockRun<'_>) -> f64 {
    let (report, secs) = time(|| run.run().unwrap());
    secs * 1e9 / report.totals().messages_sent as f64
}

/// ns per message of `kernel` on a two-PE system with queues `depth` deep, untimed, and the messages.
fn per_message_ns(kernel: &KernelDef, count: u64, depth: usize, timing: Option<Timing>) -> f64 {
    let system = two_pes(depth);
    let run = message_run(&system, kernel, count, timing);
    best_of(|| ns_per_message(&run))
}

fn messages(m: &Machine, count: u64) {
    // A round moves at most `depth` messages per queue, so shallow queues show the per-round cost of
    // the executor and deep ones the per-message cost of send and recv.
    for (depth, target) in [(4, 50.0), (64, 30.0)] {
        let ns = per_message_ns(&stream::KERNEL, count, depth, None);
        let note = format!("{:.1}x push+pop; {count} messages", ns / m.push_pop_ns);
        let label = format!("untimed send+recv, streaming, queue depth {depth}");
        println!("{}", figure(&label, ns, "ns/msg", Goal::AtMost(target), &note));
    }
    let ns = per_message_ns(&ping_pong::KERNEL, count / 4, 4, None);
    let note = format!("{:.1}x push+pop; a round trip per message", ns / m.push_pop_ns);
    println!("{}", figure("untimed ping-pong, queue depth 4", ns, "ns/msg", Goal::None, &note));
}

/// The timing model's cost: the same stream (depth 4) timed, its runs taking turns with untimed
/// ones, so that the ratio compares runs of the same moments (the machine is shared, and its speed
/// drifts between the untimed figure's runs and these).
fn timing(m: &Machine, count: u64) {
    let system = two_pes(4);
    let untimed = message_run(&system, &stream::KERNEL, count, None);
    let timed = message_run(&system, &stream::KERNEL, count, Some(Timing::default()));
    let (mut untimed_ns, mut timed_ns) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..RUNS {
        untimed_ns = untimed_ns.min(ns_per_message(&untimed));
        timed_ns = timed_ns.min(ns_per_message(&timed));
    }
    let note = format!("{:.2} ns/msg, {:.1}x push+pop", timed_ns, timed_ns / m.push_pop_ns);
    println!("{}", figure("timed streaming, queue depth 4", 1e3 / timed_ns, "M msg/s", Goal::AtLeast(15.0), &note));
    let note = format!("{timed_ns:.1} vs {untimed_ns:.1} ns/msg, runs taking turns");
    println!("{}", figure("timed / untimed cost per message", timed_ns / untimed_ns, "x", Goal::AtMost(1.5), &note));
}

/// Set, makes this benchmark's process do [`reduce_calls`] and print its figures: the first call of a
/// process pays for the OS handing it fresh memory, as a program's first collective does, not for
/// what the benchmark's other sections left behind.
const REDUCE_RUN: &str = "KERNBENCH_BENCH_REDUCE";

/// The ring all-reduce of 64 MiB f32 on each of 8 PEs in this process: its first call, then the best of
/// [`RUNS`] more, as any program that runs more than one collective sees, each after a timing of the
/// machine's in-place add ([`InPlaceAdd`]), so that the two are measured at the same moments (the
/// machine is shared, and its memory bandwidth drifts). Prints the bytes reduced, the two calls'
/// seconds and the best add's GB/s.
fn reduce_calls() {
    let per_pe_bytes = reduce_bytes();
    let system = System::shape(1, 1, 1, 8).unwrap();
    let plan = InstallPlan::build(&system, "ring_1d", "all_pes").unwrap();
    let params = json!({"chunks": 1});
    let kernel = kernbench::algorithms::ring_allreduce::KERNEL.instantiate(params.as_object().unwrap()).unwrap();
    let buffers = || -> Vec<PeBuffers> {
        (0..8)
            .map(|rank| {
                let input = Tile::filled(F32, per_pe_bytes / 4, rank as f64);
                PeBuffers { output: input.clone(), input }
            })
            .collect()
    };
    let mut reduced_bytes = 0.0;
    let mut run_once = || {
        let inputs = buffers();
        let (report, secs) = time(|| Runtime::new(&system).run(&plan, &*kernel, inputs, Call::default()).unwrap());
        reduced_bytes = report.totals().reduced_elements as f64 * 4.0;
        secs
    };
    let mut add = InPlaceAdd::new();
    let mut add_gbps = add.gbps();
    let cold = run_once();
    let warm = best_of(|| {
        add_gbps = add_gbps.max(add.gbps());
        run_once()
    });
    println!("{reduced_bytes} {cold} {warm} {add_gbps}");
}

/// Bytes per PE of [`reduce_calls`].
fn reduce_bytes() -> usize {
    if quick() { 4 << 20 } else { 64 << 20 }
}

/// [`reduce_calls`]' reduced bytes per second over the in-place add's timed beside them, warm and on the
/// first call, each the best of [`RUNS`] processes of its own ([`REDUCE_RUN`]).
fn reduce() {
    let (mut reduced_bytes, mut cold, mut warm, mut add_gbps) = (0.0, f64::INFINITY, f64::INFINITY, 0.0);
    for _ in 0..RUNS {
        let figures = again(REDUCE_RUN, "1");
        let [bytes, first, best, add] = figures[..] else { panic!("unexpected figures {figures:?}") };
        (reduced_bytes, cold, warm, add_gbps) = (bytes, cold.min(first), warm.min(best), f64::max(add_gbps, add));
    }
    let per_pe_bytes = reduce_bytes();
    let mib = per_pe_bytes >> 20;
    for (label, secs, target) in [("warm", warm, 0.8), ("first call", cold, 0.4)] {
        let gbps = reduced_bytes / secs / 1e9;
        let label = format!("ring all-reduce {mib} MiB f32 x 8 PEs, {label}");
        let note = format!("reduced / add bandwidth: {gbps:.2} / {add_gbps:.2} GB/s, {secs:.3} s; own process");
        println!("{}", figure(&label, gbps / add_gbps, "ratio", Goal::AtLeast(target), &note));
    }
}

/// The race detector's cost on the one-sided one-shot all-reduce at 1 MiB per rank on the built-in
/// system (4 SIPs, a PE each): with it on against off, best of a few runs each.
fn race_detector() {
    let system = System::builtin();
    let elements = if quick() { 1 << 16 } else { 1 << 18 };
    let kernels = [
        ("race detector on / off", &kernbench::algorithms::symmetric_one_shot_allreduce::KERNEL, "signals"),
        ("race detector on / off, atomics", &one_shot_with_atomics::KERNEL, "atomic flags"),
    ];
    for (label, kernel, how) in kernels {
        let run = |on: bool| {
            let run = MockRun::new(&system, "full", "leader_only", kernel)
                .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
                .race_detector(on);
            best_of(|| time(|| run.run().unwrap()).1)
        };
        let off = run(false);
        let on = run(true);
        let note = format!("one-sided one-shot, {how}, 1 MiB per rank: {:.2} vs {:.2} ms", on * 1e3, off * 1e3);
        println!("{}", figure(label, on / off, "x", Goal::AtMost(2.0), &note));
    }
}

/// One-shot all-reduce synchronised by atomics: each rank puts its input into its slot of every
/// peer's `slots` and raises its flag there with a releasing fetch-add; each waits (acquiring) for
/// every peer's flag and reduces in rank order.
#[ccl_kernel]
fn one_shot_with_atomics(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let len = data.len();
    let slots = tl.symmetric("slots", data.dtype(), n * len);
    let flags = tl.symmetric("flags", I64, n);
    for peer in (0..n).filter(|&p| p != rank) {
        tl.put(peer, &slots, rank * len, &data);
        tl.fence();
        tl.atomic_add(peer, &flags, rank, 1, MemoryOrder::Release, Scope::System);
    }
    tl.quiet();
    let mut acc = Tile::zeros(data.dtype(), len);
    for peer in 0..n {
        let theirs = if peer == rank {
            data.clone()
        } else {
            tl.wait_value(&flags, peer, Cmp::Eq, 1, Scope::System);
            tl.read(&slots, peer * len, len)
        };
        tl.reduce(&mut acc, &theirs, ReduceOp::Sum);
    }
    tl.store(Output, &acc);
}

/// Each shipped kernel's state on a PE: the size of the coroutine it starts as (the future the runtime
/// polls, its locals and those of the helpers it awaits), one line per kernel, largest first.
fn state() {
    let registry = kernbench::algorithms::default_registry();
    let mut sizes = std::collections::BTreeMap::new();
    for algorithm in registry.algorithms() {
        sizes.insert(algorithm.kernel.name, algorithm.state_bytes());
    }
    let mut sizes: Vec<_> = sizes.into_iter().collect();
    sizes.sort_by_key(|&(name, bytes)| (std::cmp::Reverse(bytes), name));
    for (kernel, bytes) in sizes {
        let label = format!("state: {kernel}");
        println!("{}", figure(&label, bytes as f64, "B", Goal::None, "the coroutine, per PE and lane"));
    }
}

/// Set to a thread count, makes this benchmark's process do one million-PE run on that many threads
/// and print its seconds, rounds and peak memory in GiB: each run gets a process of its own, so that
/// neither inherits memory the other has already faulted in (nor its peak).
const MILLION_RUN: &str = "KERNBENCH_BENCH_MILLION_THREADS";

/// Runs this benchmark again in a process of its own with `var` set to `value` (one of the cases its
/// `main` runs alone), and returns the figures it prints.
fn again(var: &str, value: &str) -> Vec<f64> {
    let output = Command::new(std::env::current_exe().expect("this benchmark's path"))
        .env(var, value)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the benchmark again");
    assert!(output.status.success(), "the benchmark with {var}={value:?} failed");
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace().map(|t| t.parse().expect("a figure")).collect()
}

/// The million-PE system: 64 SIPs of 16x16 cubes of 64 PEs (4,096 PEs with `KERNBENCH_BENCH_QUICK`).
fn million_system() -> System {
    let (sips, w, h, pes) = if quick() { (4, 4, 4, 64) } else { (64, 16, 16, 64) };
    System::shape(sips, w, h, pes).unwrap()
}

/// One hierarchical all-reduce on the million-PE system, 16 B per PE, on `threads` threads: seconds,
/// rounds and this process's peak memory in GiB.
fn million_run(threads: usize) -> (f64, u64, f64) {
    let system = million_system();
    let total = system.total_pes();
    let run =
        MockRun::new(&system, "hierarchical_3level", "all_pes", &kernbench::algorithms::hierarchical_allreduce::KERNEL)
            .params(json!({"chunks": 1}))
            .inputs(|_, _| Tile::filled(F32, 4, 1.0))
            .threads(threads);
    let (report, secs) = time(|| run.run().unwrap());
    assert!(report.pes().iter().all(|p| p.output == Tile::filled(F32, 4, total as f64)));
    (secs, report.rounds(), peak_rss_gib())
}

/// The hierarchical all-reduce over 1,048,576 PEs on one thread (with its peak memory) and on two,
/// each run in a process of its own ([`MILLION_RUN`]), best of [`RUNS`]. The one- and two-thread runs
/// take turns, so that the speed-up compares runs of the same moments (the machine is shared, and its
/// speed drifts between a batch of one's runs and a batch of the other's). Beside them, two one-thread
/// runs at once: how much the two cores give runs that share nothing but the machine, the ceiling the
/// speed-up is judged against.
fn million_pes() {
    let total = million_system().total_pes();
    // Per thread count: best seconds, rounds and best peak.
    let mut best = [(f64::INFINITY, 0.0, f64::INFINITY); 2];
    // Two one-thread runs at once, each a process of its own: the seconds until both are done.
    let mut pair = f64::INFINITY;
    for _ in 0..RUNS {
        for (threads, best) in [1, 2].into_iter().zip(&mut best) {
            let figures = again(MILLION_RUN, &threads.to_string());
            let [run_secs, run_rounds, run_peak] = figures[..] else { panic!("unexpected figures {figures:?}") };
            *best = (best.0.min(run_secs), run_rounds, best.2.min(run_peak));
        }
        let both = std::thread::scope(|s| {
            let runs: Vec<_> = (0..2).map(|_| s.spawn(|| again(MILLION_RUN, "1")[0])).collect();
            runs.into_iter().map(|run| run.join().expect("a one-thread run")).fold(0.0, f64::max)
        });
        pair = pair.min(both);
    }
    for (threads, (secs, rounds, peak)) in [1, 2].into_iter().zip(best) {
        let label = format!("hierarchical all-reduce, {total} PEs, {threads} thread(s)");
        let note = format!("{rounds} rounds, peak RSS {peak:.2} GiB, a process of its own");
        let goal = if threads == 1 { Goal::AtMost(6.0) } else { Goal::None };
        println!("{}", figure(&label, secs, "s", goal, &note));
        if threads == 1 {
            println!(
                "{}",
                figure("same, peak memory (1 thread)", peak, "GiB", Goal::AtMost(2.0), "VmHWM of the process")
            );
        }
    }
    // Two runs that share nothing, one a core, go at most this much faster than one: the most two
    // threads of one run can get from these two cores (their memory, caches and the host's page faults
    // are shared).
    let ceiling = 2.0 * best[0].0 / pair;
    let speedup = best[0].0 / best[1].0;
    let note = format!("2 cores, runs taking turns; this machine's ceiling {ceiling:.2}x");
    println!("{}", figure("same, 2 threads / 1 thread speed-up", speedup, "x", Goal::AtLeast(1.85), &note));
    let note = format!("2 x 1-thread time / {pair:.3} s for two 1-thread runs at once");
    println!("{}", figure("machine: two such runs at once / one", ceiling, "x", Goal::None, &note));
}

/// Runs `kernbench` (the CLI binary built beside this benchmark) with `args` to completion, and returns
/// its wall time in seconds and peak resident memory in GiB.
#[allow(clippy::zombie_processes, reason = "waited for by wait4, which also gives its peak memory")]
fn cli_process(args: &[&str]) -> (f64, f64) {
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start kernbench");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into the two locals above; `child` is not waited on
    // again (it is dropped without `wait`).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "kernbench {args:?} failed");
    // ru_maxrss is in KiB on Linux.
    (secs, usage.ru_maxrss as f64 * 1024.0 / GIB)
}

/// A copy of the shipped system `name` in `dir`, each `(from, to)` of `edits` replaced: its path.
fn system_file(dir: &std::path::Path, name: &str, edits: &[(&str, String)]) -> String {
    let shipped = format!("{}/../configs/systems/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut spec = std::fs::read_to_string(&shipped).expect("a shipped system");
    for (from, to) in edits {
        assert!(spec.contains(from), "{shipped} has no `{from}`");
        spec = spec.replace(from, to);
    }
    let path = dir.join(format!("edited-{name}"));
    std::fs::write(&path, spec).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Set to `kernbench`'s arguments (separated by [`ARGS_SEPARATOR`]), makes this benchmark's process
/// run [`cli_process`] on them and print its seconds and peak memory in GiB. A process started from
/// this one's memory counts this one's peak as its own (Linux hands the peak of the memory a process
/// leaves at `exec` to the program it becomes), so `kernbench` is started from a fresh, small process.
const CLI_RUN: &str = "KERNBENCH_BENCH_CLI";

/// Separates the arguments in [`CLI_RUN`].
const ARGS_SEPARATOR: char = '\u{1f}';

/// [`cli_process`] in a process of its own ([`CLI_RUN`]) [`RUNS`] times: the best wall time and the
/// largest peak memory.
fn best_process(args: &[&str]) -> (f64, f64) {
    let mut peak = 0.0f64;
    let secs = best_of(|| {
        let figures = again(CLI_RUN, &args.join(&ARGS_SEPARATOR.to_string()));
        let [secs, rss] = figures[..] else { panic!("unexpected figures {figures:?}") };
        peak = peak.max(rss);
        secs
    });
    (secs, peak)
}

/// `kernbench bench all_reduce --algos ring --sizes 1M` as a whole process: its wall time on a ring of
/// 1,024 SIPs and of 16 (the shipped `ring16.json` with more SIPs), and its peak memory at 1,024; the
/// same timing-only at 1 MiB and 1 GiB per rank; and the timing-only hierarchical all-reduce of 64 MiB
/// over 1,048,576 PEs (the built-in system's links, 256 SIPs of 16x16 cubes of 16 PEs: a sixteenth of
/// the 16,777,216-PE run the target is set for, whose targets it is held to a sixteenth of), then
/// that run itself when the machine has the memory ([`sixteen_times`]).
fn cli(m: &Machine) {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let ring16 = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/ring16.json");
    let big = if quick() { 64 } else { 1024 };
    let path = system_file(dir.path(), "ring16.json", &[("\"sips\": 16", format!("\"sips\": {big}"))]);
    let path = path.as_str();
    for (sips, system, target) in [(big, path, 1.5), (16, ring16, 0.02)] {
        let (secs, peak) =
            best_process(&["bench", "all_reduce", "--algos", "ring", "--sizes", "1M", "--system", system]);
        let label = format!("kernbench bench ring all-reduce 1 MiB, {sips} SIPs");
        let note = if sips == big {
            // What writing its peak's pages for the first time takes at the rate measured for fresh
            // memory: most of the wall time when the host of a virtual machine backs few of them.
            let touch = peak * GIB / 1e9 / m.fresh_gbps;
            format!("wall, whole process; its peak written fresh at the machine's rate: {touch:.2} s")
        } else {
            "wall, whole process".to_owned()
        };
        println!("{}", figure(&label, secs, "s", Goal::AtMost(target), &note));
        if sips == big {
            let label = format!("same, peak memory, {sips} ranks x 1 MiB");
            println!("{}", figure(&label, peak, "GiB", Goal::AtMost(2.5), "whole process"));
        }
    }
    for (size, shown, target) in [("1M", "1 MiB", 1.0), ("1G", "1 GiB", 1.0)] {
        let args = ["bench", "all_reduce", "--algos", "ring", "--sizes", size, "--system", path, "--timing-only"];
        let (secs, peak) = best_process(&args);
        let label = format!("same, timing-only, {shown} per rank, {big} SIPs");
        let note = format!("wall, whole process; peak {peak:.2} GiB");
        println!("{}", figure(&label, secs, "s", Goal::AtMost(target), &note));
    }
    let (sips, pes) = if quick() { (4, 4) } else { (256, 16) };
    let edits = [
        ("\"sips\": 4", format!("\"sips\": {sips}")),
        ("\"w\": 4, \"h\": 4", "\"w\": 16, \"h\": 16".to_owned()),
        ("\"pes_per_cube\": 8", format!("\"pes_per_cube\": {pes}")),
    ];
    let million = system_file(dir.path(), "default.json", &edits);
    let args = [
        "run",
        "all_reduce",
        "--algo",
        "hierarchical_allreduce",
        "--layout",
        "multi_pe",
        "--bytes",
        "64M",
        "--timing-only",
        "--system",
        &million,
    ];
    let (secs, peak) = best_process(&args);
    let total = sips * 16 * 16 * pes;
    let label = format!("hierarchical timing-only run, {total} PEs");
    println!("{}", figure(&label, secs, "s", Goal::AtMost(180.0 / 16.0), "64 MiB per SIP, 1 thread; 1/16 of 3 min"));
    let label = format!("same, peak memory, {total} PEs");
    println!("{}", figure(&label, peak, "GiB", Goal::AtMost(1.0), "whole process; 1/16 of 16 GiB"));
    if !quick() {
        sixteen_times(dir.path(), peak);
    }
}

/// The run the target is set for: the hierarchical timing-only all-reduce of 64 MiB per SIP over 4,096
/// SIPs of 16x16 cubes of 16 PEs (16,777,216 PEs), once (it takes minutes), when the machine has the
/// memory it needs: about sixteen times `peak`, the peak of the same over 256 SIPs. Its estimate, an
/// upper bound, asks for more than a 24 GiB machine has free, so the limit is lifted past it: the check
/// here is what keeps it from a machine it does not fit.
fn sixteen_times(dir: &std::path::Path, peak: f64) {
    let label = "hierarchical timing-only run, 16777216 PEs";
    // Sixteen times the PEs hold a little less than sixteen times the memory (the fixed part).
    let needs = 16.0 * peak;
    let free = kernbench_cli::memory::available().map_or(0.0, |bytes| bytes as f64 / GIB);
    if free < needs {
        println!("{label}: not run: needs about {needs:.1} GiB, {free:.1} GiB free");
        return;
    }
    let edits = [
        ("\"sips\": 4", "\"sips\": 4096".to_owned()),
        ("\"w\": 4, \"h\": 4", "\"w\": 16, \"h\": 16".to_owned()),
        ("\"pes_per_cube\": 8", "\"pes_per_cube\": 16".to_owned()),
    ];
    let system = system_file(dir, "default.json", &edits);
    let allowed = "64G";
    let args = ["run", "all_reduce", "--algo", "hierarchical_allreduce", "--layout", "multi_pe", "--bytes", "64M"];
    let args = [&args[..], &["--timing-only", "--system", &system, "--max-memory", allowed]].concat();
    let (secs, peak) = cli_process(&args);
    println!("{}", figure(label, secs, "s", Goal::AtMost(180.0), "64 MiB per SIP, 1 thread, one run"));
    let note = format!("whole process; {free:.1} GiB free, --max-memory {allowed}");
    println!("{}", figure("same, peak memory", peak, "GiB", Goal::AtMost(16.0), &note));
}

/// Set to `million` or `rounds`, makes this benchmark's process one process of an MPI job (started by
/// [`spread`] under `mpirun`) that runs that case spread over the job and prints its figures.
const SPREAD_RUN: &str = "KERNBENCH_BENCH_SPREAD";

/// Round trips of the one-message ping-pong that times a round's hand-over.
#[cfg(feature = "mpi")]
fn round_trips() -> u64 {
    if quick() { 2_000 } else { 20_000 }
}

/// A digest of everything a run reports: outputs, figures and times, bit for bit.
#[cfg(feature = "mpi")]
fn digest(report: &kernbench::sim::RunReport) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    report.rounds().hash(&mut h);
    for pe in report.pes() {
        pe.output.to_bits_vec().hash(&mut h);
        format!("{:?}", pe.figures).hash(&mut h);
    }
    if let Some(time) = report.time() {
        time.completion_ns.to_bits().hash(&mut h);
        for pe in &time.pes {
            [pe.finish_ns, pe.busy_ns, pe.blocked_ns, pe.idle_ns].map(f64::to_bits).hash(&mut h);
        }
        for channel in &time.channels {
            (channel.bytes, channel.busy_ns.to_bits()).hash(&mut h);
        }
    }
    h.finish()
}

/// One process's part of [`spread`]: the case's run spread over the MPI job this process is in.
/// Prints `process seconds rounds peak_gib digest`.
#[cfg(feature = "mpi")]
fn spread_process(case: &str) {
    use std::sync::Arc;

    use kernbench::sim::spread::{Exchange, Mpi, ReportTo};
    let mpi: Arc<dyn Exchange> = Arc::new(Mpi::init().expect("MPI starts"));
    let process = mpi.process();
    let (report, secs) = match case {
        "million" => {
            let system = million_system();
            let mock = MockRun::new(
                &system,
                "hierarchical_3level",
                "all_pes",
                &kernbench::algorithms::hierarchical_allreduce::KERNEL,
            )
            .params(json!({"chunks": 1}))
            .inputs(|_, _| Tile::filled(F32, 4, 1.0))
            .spread_over(Arc::clone(&mpi))
            .report_to(ReportTo::First)
            .release_memory(Some(kernbench_cli::memory::Allocator::release_freed));
            time(|| mock.run().unwrap())
        }
        _ => {
            let system = System::shape(2, 1, 1, 1).unwrap();
            let mock = MockRun::new(&system, "ring_1d", "all_pes", &ping_pong::KERNEL)
                .params(json!({"count": round_trips()}))
                .inputs(|_, _| Tile::zeros(F32, 1))
                .spread_over(Arc::clone(&mpi));
            time(|| mock.run().unwrap())
        }
    };
    println!("{process} {secs} {} {} {} {}", report.rounds(), peak_rss_gib(), digest(&report), cpu_secs());
}

#[cfg(not(feature = "mpi"))]
fn spread_process(_: &str) {
    panic!("this benchmark was built without the `mpi` feature");
}

/// The CPU time this process has used, user and system, in seconds.
#[cfg(feature = "mpi")]
fn cpu_secs() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: fills the local above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// One process's figures from [`spread_process`]: seconds, rounds, peak GiB, digest, CPU seconds.
type SpreadLine = (f64, u64, f64, u64, f64);

/// Each process's line of [`spread_process`] for `case` on `processes` processes.
fn spread_job(case: &str, processes: usize) -> Vec<SpreadLine> {
    let output = Command::new("mpirun")
        .args(["--oversubscribe", "--bind-to", "none", "-np", &processes.to_string()])
        .arg(std::env::current_exe().expect("this benchmark's path"))
        .env(SPREAD_RUN, case)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stderr(Stdio::inherit())
        .output()
        .expect("run mpirun");
    assert!(output.status.success(), "{case} on {processes} processes failed");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines: Vec<(usize, SpreadLine)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [p, secs, rounds, peak, digest, cpu] = f[..] else { panic!("unexpected output `{l}`") };
            (
                p.parse().unwrap(),
                (
                    secs.parse().unwrap(),
                    rounds.parse().unwrap(),
                    peak.parse().unwrap(),
                    digest.parse().unwrap(),
                    cpu.parse().unwrap(),
                ),
            )
        })
        .collect();
    lines.sort_by_key(|l| l.0);
    assert_eq!(lines.len(), processes, "one line per process: `{text}`");
    lines.into_iter().map(|l| l.1).collect()
}

/// Runs spread over the processes of an MPI job on this machine (shared memory): the million-PE
/// hierarchical all-reduce on 1, 2 and 4 processes (time, peak memory per process, identical to one
/// process), and the cost of a round's hand-over at 2 processes from a ping-pong between two SIPs.
fn spread() {
    if !cfg!(feature = "mpi") || Command::new("mpirun").arg("--version").output().is_err() {
        println!("# spread: needs MPI (cargo bench --bench runtime --features mpi, and mpirun)");
        return;
    }
    let total = million_system().total_pes();
    let (mut alone, mut peak_alone, mut cpu_alone) = (None, f64::NAN, f64::NAN);
    for processes in [1, 2, 4] {
        let (mut secs, mut peak, mut cpu, mut digests) = (f64::INFINITY, f64::INFINITY, f64::INFINITY, Vec::new());
        for _ in 0..RUNS {
            let lines = spread_job("million", processes);
            secs = secs.min(lines.iter().map(|l| l.0).fold(0.0, f64::max));
            peak = peak.min(lines.iter().map(|l| l.2).fold(0.0, f64::max));
            cpu = cpu.min(lines.iter().map(|l| l.4).fold(0.0, f64::max));
            // Process 0 returns the whole report; the others their own PEs' parts.
            digests.push(lines[0].3);
        }
        let alone = *alone.get_or_insert(digests[0]);
        assert!(
            digests.iter().all(|&d| d == alone),
            "{processes} processes: process 0's report differs from one process's"
        );
        let label = format!("hierarchical all-reduce, {total} PEs, {processes} procs");
        let note = "process 0's report is 1 process's (outputs, figures, times)";
        println!("{}", figure(&label, secs, "s", Goal::None, note));
        let label = format!("same, peak memory per process, {processes} procs");
        println!("{}", figure(&label, peak, "GiB", Goal::None, "VmHWM, the largest process"));
        if processes == 1 {
            (peak_alone, cpu_alone) = (peak, cpu);
        } else {
            // What every process does or holds whole, as a share of one process's: from
            // x = whole + (1 - whole) / processes.
            let whole = |x: f64| (processes as f64 * x - 1.0) / (processes as f64 - 1.0);
            let label = format!("same, memory per process, {processes} / 1 procs");
            let goal = Goal::AtMost(SPREAD_MEMORY_SHARE + 1.0 / processes as f64);
            let share = peak / peak_alone;
            let note = format!("target 1/{processes} + {SPREAD_MEMORY_SHARE}; held whole: {:.2}", whole(share));
            println!("{}", figure(&label, share, "x", goal, &note));
            let label = format!("same, CPU time per process, {processes} / 1 procs");
            let share = cpu / cpu_alone;
            let note = format!("user+sys, the busiest process; done whole: {:.2}", whole(share));
            println!("{}", figure(&label, share, "x", Goal::None, &note));
        }
    }
    let (alone_secs, rounds) = {
        let lines = spread_job("rounds", 1);
        (lines.iter().map(|l| l.0).fold(f64::INFINITY, f64::min), lines[0].1)
    };
    let mut best = f64::INFINITY;
    for _ in 0..RUNS {
        let lines = spread_job("rounds", 2);
        best = best.min(lines.iter().map(|l| l.0).fold(0.0, f64::max));
    }
    let overhead_us = (best - alone_secs) / rounds as f64 * 1e6;
    let note = format!(
        "{rounds} rounds of a 2-SIP ping-pong: {:.2} us/round spread, {:.2} alone",
        best / rounds as f64 * 1e6,
        alone_secs / rounds as f64 * 1e6
    );
    println!("{}", figure("round hand-over at 2 processes, beyond 1", overhead_us, "us", Goal::AtMost(10.0), &note));
}

/// What every process of a spread run holds whole, as a share of the single-process run's memory:
/// the plan, every queue's bookkeeping and route, and the end report (each process books its own
/// channels: a run this large places divided).
const SPREAD_MEMORY_SHARE: f64 = 0.1;

/// Whether section `name` runs: all of them, or those named in `KERNBENCH_BENCH_ONLY`.
fn section(name: &str) -> bool {
    std::env::var("KERNBENCH_BENCH_ONLY").map_or(true, |only| only.split(',').any(|s| s == name))
}

fn main() {
    if let Ok(case) = std::env::var(SPREAD_RUN) {
        spread_process(&case);
        return;
    }
    if let Ok(args) = std::env::var(CLI_RUN) {
        let (secs, peak) = cli_process(&args.split(ARGS_SEPARATOR).collect::<Vec<_>>());
        println!("{secs} {peak}");
        return;
    }
    if std::env::var_os(machine::FRESH_RUN).is_some() {
        let (first, again) = machine::fresh_memory();
        println!("{first} {again}");
        return;
    }
    if std::env::var_os(REDUCE_RUN).is_some() {
        reduce_calls();
        return;
    }
    if let Ok(threads) = std::env::var(MILLION_RUN) {
        let (secs, rounds, peak) = million_run(threads.parse().expect("a thread count"));
        println!("{secs} {rounds} {peak}");
        return;
    }
    let count = if quick() { 100_000 } else { 2_000_000 };
    println!("{}", lines::header());
    let m = machine();
    if section("messages") {
        messages(&m, count);
    }
    if section("timing") {
        timing(&m, count);
    }
    if section("reduce") {
        reduce();
    }
    if section("race") {
        race_detector();
    }
    if section("state") {
        state();
    }
    if section("million") {
        million_pes();
    }
    if section("cli") {
        cli(&m);
    }
    if section("spread") {
        spread();
    }
}
