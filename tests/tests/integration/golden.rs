//! Golden simulated times: every shipped algorithm on every shipped system (`configs/systems/*.json`
//! and the built-in one) at a few sizes, compared exactly with `tests/golden/times.txt`, so that any
//! change to the timing model shows as a diff of that file. Combinations that cannot run are
//! recorded with why.
//!
//! The runs use a watchdog loop budget far below the default ([`LOOP_BUDGET`]), which shows that no
//! shipped algorithm comes near it.
//!
//! Regenerate the file after an intended change with `KERNBENCH_BLESS=1 cargo test -p kernbench-tests
//! --test integration golden`, and review the diff.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kernbench::{Collective, Communicator, System};
use kernbench_cli::sweep::{Series, Sweep, SweepError};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/times.txt");

/// nccl-tests sizes per rank: one latency-bound, one in between, one bandwidth-bound, small
/// enough for a debug build to run every combination in a few seconds.
const SIZES: [u64; 3] = [1 << 10, 1 << 14, 1 << 18];

/// An all-to-all over more ranks than this is timed at the first size only: its `n (n - 1)` messages
/// (261632 on the built-in system's 512 PEs) take up to seconds per size in a debug build, whatever
/// the size.
const LARGEST_ALL_TO_ALL_AT_EVERY_SIZE: usize = 64;

/// The watchdog's loop budget of these runs, 1,024 times below the default: every shipped algorithm runs
/// within it on every shipped system (up to 512 ranks), so none comes near the default. The most loop
/// iterations between two steps of a shipped kernel grow with its ranks, not its size
/// (`hierarchical_all_to_all_pes` builds each rank's column from every rank's block: about 2 (n + groups)
/// per send), and the message limit keeps those rank counts far below where the default would stop them.
const LOOP_BUDGET: u64 = kernbench::sim::DEFAULT_LOOP_BUDGET >> 10;

/// The shipped systems by name: the built-in one, then every file of `configs/systems/` in order,
/// except one whose spec is the built-in one's, which is noted in `out` instead of timed twice.
pub(crate) fn systems(out: &mut String) -> Vec<(String, System)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/systems");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let builtin = System::builtin();
    let spec = |system: &System| serde_json::to_value(system.spec()).unwrap();
    let mut systems = vec![("builtin".to_owned(), builtin.clone())];
    for file in files {
        let name = format!("configs/systems/{}", file.file_name().unwrap().to_string_lossy());
        let system = System::from_file(&file).unwrap();
        if spec(&system) == spec(&builtin) {
            let _ = writeln!(out, "# {name}: the built-in system's spec, timed as builtin");
        } else {
            systems.push((name, system));
        }
    }
    systems
}

/// One line per system, algorithm and size: the simulated time in ns, exactly (`f64`'s shortest
/// round-trip form), or why it cannot run; with data, or `timing_only`. Systems run on threads of
/// their own; their lines keep the systems' order.
fn table(timing_only: bool) -> String {
    let mut out = String::from("# system algorithm size(B/rank) simulated-ns | cannot run: why | skipped: why\n");
    let systems = systems(&mut out);
    std::thread::scope(|scope| {
        let lines: Vec<_> =
            systems.iter().map(|(name, system)| scope.spawn(move || system_lines(name, system, timing_only))).collect();
        for lines in lines {
            out.push_str(&lines.join().expect("a system's runs do not panic"));
        }
    });
    out
}

fn system_lines(name: &str, system: &System, timing_only: bool) -> String {
    let mut out = String::new();
    let mut comm = Communicator::new(system.clone()).loop_budget(LOOP_BUDGET).timing_only(timing_only);
    for collective in Collective::ALL {
        let algorithms = Series::parse_list("all", comm.registry(), collective, comm.system()).unwrap();
        let sweep = Sweep::new(collective, algorithms.clone(), SIZES.to_vec());
        for series in &algorithms {
            let mut too_many_messages = false;
            for size in SIZES {
                let outcome = if too_many_messages {
                    format!(
                        "skipped: an all-to-all over more than {LARGEST_ALL_TO_ALL_AT_EVERY_SIZE} ranks is timed at the first size only"
                    )
                } else {
                    match sweep.call(&mut comm, series, size) {
                        Ok((row, _)) => {
                            assert_eq!(row.wrong, 0, "{name} {} {size}: wrong results", series.label());
                            assert_eq!(row.checked, !timing_only, "{name} {} {size}", series.label());
                            too_many_messages =
                                collective == Collective::AllToAll && row.ranks > LARGEST_ALL_TO_ALL_AT_EVERY_SIZE;
                            format!("{}", row.time_ns)
                        }
                        Err(SweepError::Call { source, .. }) => format!("cannot run: {source}"),
                        Err(e) => panic!("{name} {} {size}: {e}", series.label()),
                    }
                };
                let _ = writeln!(out, "{name} {} {size} {outcome}", series.label());
            }
        }
    }
    out
}

#[test]
fn simulated_times_of_every_algorithm_on_every_shipped_system_are_the_golden_ones() {
    let got = table(false);
    if std::env::var_os("KERNBENCH_BLESS").is_some() {
        std::fs::write(GOLDEN, &got).unwrap();
        return;
    }
    assert_golden(&got, "");
}

#[test]
fn timing_only_runs_take_the_golden_times_to_the_bit() {
    // The golden file is the runs with data: timing-only ones, whose tiles carry no bytes, must give
    // the same times.
    if std::env::var_os("KERNBENCH_BLESS").is_none() {
        assert_golden(&table(true), " (timing only)");
    }
}

/// Asserts that `got` is the golden table, line by line.
fn assert_golden(got: &str, what: &str) {
    let want = std::fs::read_to_string(GOLDEN)
        .unwrap_or_else(|e| panic!("cannot read {GOLDEN} ({e}); create it with KERNBENCH_BLESS=1"));
    let changed: Vec<String> = want
        .lines()
        .zip(got.lines())
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("  golden: {w}\n  now:    {g}"))
        .collect();
    assert!(
        changed.is_empty() && want.lines().count() == got.lines().count(),
        "simulated times{what} differ from {GOLDEN} ({} lines golden, {} now); if the change is intended, \
         regenerate it with KERNBENCH_BLESS=1:\n{}",
        want.lines().count(),
        got.lines().count(),
        changed.join("\n")
    );
}
