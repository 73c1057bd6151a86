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
fn the_all_to_all_v_sample_is_what_bench_prints() {
    let args = ["bench", "alltoallv", "--algos", "all", "--sizes", "1K,1M"];
    check(&format!("cargo run --release -- {}", args.join(" ")), &args, Path::new(REPO));
}

#[test]
fn the_slow_link_sample_is_what_bench_prints() {
    let args = [
        "bench",
        "all_reduce",
        "--system",
        "configs/systems/ring16.json",
        "--algos",
        "ring",
        "--sizes",
        "1M,64M",
        "--timing-only",
        "--fault",
        "link=3>4:slow=2",
    ];
    check("--fault link=3\\>4:slow=2", &args, Path::new(REPO));
}

#[test]
fn the_cut_ring_sample_is_the_error_run_prints() {
    let cut = "--fault link=3-4:fail@1172us --fault link=11-12:fail@1172us";
    let command =
        format!("run all_reduce --system configs/systems/ring16.json --algo ring --bytes 64M --timing-only {cut}");
    let args: Vec<&str> = command.split(' ').collect();
    let out = Command::new(env!("CARGO_BIN_EXE_kernbench")).args(&args).current_dir(REPO).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "a cut ring must fail");
    let sample = sample_after(&format!("cargo run --release -- {command}"));
    assert_eq!(sample, text(&out.stderr).lines().collect::<Vec<_>>());
}

#[test]
fn the_workload_samples_are_what_workload_prints() {
    for (file, system) in [("data-parallel.json", "dgx-h100.json"), ("shared-links-ring16.json", "ring16.json")] {
        let (file, system) = (format!("configs/workloads/{file}"), format!("configs/systems/{system}"));
        let args = ["workload", file.as_str(), "--system", system.as_str()];
        check(&format!("cargo run --release -- {}", args.join(" ")), &args, Path::new(REPO));
    }
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

/// `command` (as the README writes it after `cargo run --release -- `) as arguments, its `configs/`
/// paths made absolute, for a run in a scratch directory.
fn absolute_args(command: &str) -> Vec<String> {
    assert!(README.contains(&format!("cargo run --release -- {command}\n")), "the README's command changed: {command}");
    command.split(' ').map(|a| if a.starts_with("configs/") { format!("{REPO}/{a}") } else { a.to_owned() }).collect()
}

#[test]
fn the_calibrate_sample_is_what_calibrate_prints_and_writes_the_shipped_preset() {
    let command = "calibrate configs/logs/h100x8-all_reduce-together-ring.log --system configs/calibration/dgx-h100.json \
                   --out dgx-h100.json";
    let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
    let args = absolute_args(&command);
    let dir = scratch("readme-calibrate");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    check(&format!("cargo run --release -- {command}"), &args, &dir);
    let fitted = std::fs::read_to_string(dir.join("dgx-h100.json")).unwrap();
    let shipped = std::fs::read_to_string(Path::new(REPO).join("configs/systems/dgx-h100.json")).unwrap();
    assert_eq!(fitted, shipped, "configs/systems/dgx-h100.json is not what calibrate makes of its base and log");
}

#[test]
fn the_two_node_sample_is_what_bench_prints() {
    let command =
        "bench all_reduce --system configs/systems/2x-dgx-h100-ndr.json --algos ring:lanes=16 --sizes 8G --timing-only";
    let args: Vec<&str> = command.split(' ').collect();
    check(&format!("cargo run --release -- {command}"), &args, Path::new(REPO));
}

#[test]
fn the_real_machine_plots_are_what_plot_draws() {
    let plots =
        README.lines().filter_map(|l| l.strip_prefix("cargo run --release -- ")).filter(|c| c.starts_with("plot "));
    let mut drawn = 0;
    for command in plots.filter(|c| c.contains("--compare")) {
        let shipped = command.rsplit(' ').next().unwrap();
        let dir = scratch("readme-plots");
        let args: Vec<String> =
            absolute_args(command).into_iter().map(|a| if a == shipped { "plot.svg".to_owned() } else { a }).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        output_of(&args, &dir);
        let now = std::fs::read_to_string(dir.join("plot.svg")).unwrap();
        let before = std::fs::read_to_string(Path::new(REPO).join(shipped)).unwrap();
        assert!(now == before, "{shipped} is not what `kernbench {command}` draws now");
        assert!(README.contains(&format!("]({shipped})")), "the README does not show {shipped}");
        drawn += 1;
    }
    assert_eq!(drawn, 3, "a plot per preset");
}

/// The README's table of each preset's errors against its logs, row by row as `bench --compare` prints
/// them: `| preset | log | algorithm | fitted or predicted | small | mid | large |`, each band
/// `mean / max` in percent, or `-` where the log has no size in it.
#[test]
fn the_preset_error_table_is_what_bench_compare_prints() {
    let rows: Vec<Vec<&str>> = README
        .lines()
        .skip_while(|l| !l.starts_with("| preset | log | algorithm |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(|cell| cell.trim().trim_matches('`')).collect())
        .collect();
    assert_eq!(rows.len(), 8, "a row per preset and log");
    for row in rows {
        let (preset, log, algorithm) = (row[0], row[1], row[2]);
        let collective = ["all_reduce", "all_gather", "reduce_scatter"].into_iter().find(|c| log.contains(c)).unwrap();
        let (system, log) = (format!("configs/systems/{preset}"), format!("configs/logs/{log}"));
        let args = ["bench", collective, "--system", &system, "--algos", algorithm, "--compare", &log, "--timing-only"];
        let output = output_of(&args, Path::new(REPO));
        let bands: Vec<&str> = output.lines().filter(|l| l.starts_with("# error, ")).collect();
        for (band, cell) in bands.iter().zip(&row[4..7]) {
            let want = match cell.split_once(" / ") {
                Some((mean, max)) => format!("{algorithm} mean {mean}% max {max}%"),
                None => format!("{algorithm} no measured sizes"),
            };
            assert!(band.contains(&want), "{preset} against {log}: `{band}` is not the README's `{cell}`");
        }
    }
}
