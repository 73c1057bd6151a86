//! The README's samples, checked by running their commands: simulated times are deterministic, so a
//! sample is compared line for line with what the command prints now. A `...` line in a sample stands
//! for lines left out; every other line must be printed, in order, with nothing between it and its
//! neighbours in the sample. Wall-clock figures (the speed section) depend on the machine: only their
//! format is checked.

use std::path::Path;
use std::process::Command;

use super::{scratch, text};

/// The benchmark's own line formats.
#[path = "../../benches/runtime/lines.rs"]
mod bench_lines;

const README: &str = include_str!("../../../README.md");
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The lines of the first ```text block after the first README line that contains `anchor`.
fn sample_after(anchor: &str) -> Vec<&'static str> {
    let mut lines = README.lines().skip_while(|l| !l.contains(anchor));
    assert!(lines.next().is_some(), "no `{anchor}` in the README");
    lines.skip_while(|l| *l != "```text").skip(1).take_while(|l| !l.starts_with("```")).collect()
}

/// `kernbench args` run in `dir`, which must succeed; its stdout.
fn output_of(args: &[&str], dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kernbench")).args(args).current_dir(dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "kernbench {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Whether `sample` (with `...` for left-out lines) is what `output` says.
fn matches(sample: &[&str], output: &str) -> bool {
    let output: Vec<&str> = output.lines().collect();
    let segments: Vec<&[&str]> = sample.split(|l| *l == "...").collect();
    let mut at = 0;
    for (i, segment) in segments.iter().enumerate() {
        let (first, last) = (i == 0, i == segments.len() - 1);
        let found = if first && last {
            (output == *segment).then_some(0)
        } else if first {
            output.starts_with(segment).then_some(0)
        } else if last {
            output.ends_with(segment).then(|| output.len() - segment.len()).filter(|&start| start >= at)
        } else {
            (at..=output.len().saturating_sub(segment.len())).find(|&start| output[start..].starts_with(segment))
        };
        let Some(start) = found else { return false };
        at = start + segment.len();
    }
    true
}

/// Runs `args` in `dir` and checks the sample after `anchor` against what it prints.
fn check(anchor: &str, args: &[&str], dir: &Path) {
    let sample = sample_after(anchor);
    assert!(!sample.is_empty(), "an empty sample after `{anchor}`");
    let output = output_of(args, dir);
    assert!(
        matches(&sample, &output),
        "the README's sample after `{anchor}` is not what `kernbench {}` prints now:\n--- README\n{}\n--- now\n{output}",
        args.join(" "),
        sample.join("\n")
    );
}

#[test]
fn the_bench_sample_is_what_bench_prints() {
    let args = ["bench", "all_reduce", "--algos", "all", "--sizes", "1K,1M"];
    check(&format!("A sample of `{}`", args.join(" ")), &args, Path::new(REPO));
}

#[test]
fn the_one_sided_all_to_all_sample_is_what_bench_prints() {
    let args = ["bench", "all_to_all", "--algos", "pairwise_alltoall,symmetric_alltoall", "--sizes", "1K,1M"];
    check(&format!("cargo run --release -- {}", args.join(" ")), &args, Path::new(REPO));
}

#[test]
fn the_msccl_sample_is_what_msccl_prints() {
    let args = ["msccl", "tests/fixtures/msccl/ring_allreduce.xml", "--sizes", "1K,1M"];
    check(&format!("cargo run --release -- {}", args.join(" ")), &args, Path::new(REPO));
}

#[test]
fn the_run_sample_is_what_run_prints() {
    check("A sample of `run all`", &["run", "all"], Path::new(REPO));
}

#[test]
fn the_explain_sample_is_what_explain_prints() {
    check("`explain all_reduce 64K`:", &["explain", "all_reduce", "64K"], Path::new(REPO));
}

#[test]
fn the_trace_sample_is_what_trace_prints() {
    let command = "trace all_reduce --algo ring --bytes 1M --out trace.json";
    let args: Vec<&str> = command.split(' ').collect();
    check(&format!("cargo run --release -- {command}"), &args, &scratch("readme-trace"));
}

#[test]
fn the_tune_sample_is_what_tune_prints() {
    let command = "tune all_reduce --system configs/systems/switched.json --sizes 1K..256K --out tuned.json";
    assert!(README.contains(&format!("cargo run --release -- {command}\n")), "the README's tune command changed");
    let system = format!("{REPO}/configs/systems/switched.json");
    let args: Vec<&str> =
        command.split(' ').map(|a| if a.starts_with("configs/") { system.as_str() } else { a }).collect();
    check("On `switched.json` (8 SIPs behind one switch)", &args, &scratch("readme-tune"));
}

#[test]
fn the_ring16_fidelity_sample_is_what_bench_prints() {
    let command = "bench all_reduce --system configs/systems/ring16.json --sizes 1M,16M --algos \
                   ring,ring:lanes=1,ring:lanes=2,ring:lanes=8,ring_low_latency,bidirectional_ring";
    let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(README.contains(&format!("cargo run --release -- {command}\n")), "the README's ring16 command changed");
    let args: Vec<&str> = command.split(' ').collect();
    check(&format!("cargo run --release -- {command}"), &args, Path::new(REPO));
}

#[test]
fn the_ring_modes_tune_sample_is_what_tune_prints() {
    let command = "tune all_reduce --algos ring,ring_low_latency --sizes 256..16K";
    let args: Vec<&str> = command.split(' ').collect();
    check(&format!("cargo run --release -- {command}"), &args, &scratch("readme-tune-modes"));
}

/// The README's speed sample, each line formatted again from its own figures by the function the
/// benchmark prints it with: the figures are the machine's, but the format must be the benchmark's, and
/// a figure marked `pass` must meet its target (and one marked `miss` miss it).
#[test]
fn the_speed_sample_is_in_the_format_the_benchmark_prints() {
    figures_as_the_benchmark_prints("`cargo bench --bench runtime` measures", 15);
}

/// The same for the sample of the benchmark's `spread` section, in the scale-out section.
#[test]
fn the_spread_sample_is_in_the_format_the_benchmark_prints() {
    figures_as_the_benchmark_prints("`cargo bench --bench runtime --features mpi` adds", 10);
}

/// Checks the benchmark sample after `anchor` (at least `lines` figures) line by line.
fn figures_as_the_benchmark_prints(anchor: &str, lines: usize) {
    let sample = sample_after(anchor);
    assert!(sample.len() > lines, "{sample:?}");
    assert_eq!(sample[0], bench_lines::header());
    for line in &sample[1..] {
        // Fixed columns: label, value, unit, target, mark, then the note.
        let column = |from: usize, len: usize| line.get(from..(from + len).min(line.len())).unwrap_or("").trim();
        let at = bench_lines::LABEL + 1;
        let (label, value, unit, goal) = (column(0, at), column(at, 9), column(at + 10, 8), column(at + 19, 9));
        let note = line.get(at + 35..).unwrap_or("");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("no figure in `{line}`"));
        let goal = bench_lines::Goal::parse(goal).unwrap_or_else(|| panic!("no target in `{line}`"));
        let again = bench_lines::figure(label, value, unit, goal, note);
        assert_eq!(line, &again, "the README's speed line is not the benchmark's (or its mark is wrong)");
    }
}

#[test]
fn a_sample_matches_only_what_was_printed() {
    let output = "a\nb\nc\nd\n";
    for good in
        [&["a", "b", "c", "d"][..], &["a", "..."], &["...", "d"], &["a", "...", "c", "d"], &["...", "b", "c", "..."]]
    {
        assert!(matches(good, output), "{good:?}");
    }
    for bad in [
        &["a", "b", "c"][..],
        &["b", "..."],
        &["...", "c"],
        &["a", "c", "..."],
        &["...", "c", "b", "..."],
        &["a", "...", "a"],
    ] {
        assert!(!matches(bad, output), "{bad:?}");
    }
}

#[test]
fn the_timing_only_sample_is_what_bench_prints() {
    let args = [
        "bench",
        "all_reduce",
        "--algos",
        "ring",
        "--sizes",
        "8..8G",
        "--timing-only",
        "--system",
        "configs/systems/switched.json",
    ];
    check(&format!("cargo run --release -- {}", args.join(" ")), &args, Path::new(REPO));
}
