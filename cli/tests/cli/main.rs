//! The `kernbench` binary as a user runs it: every bad invocation ends in one line on stderr and exit
//! code 2, never a panic; `bench`, `tune`, `trace` and `plot` write what they promise, whole or not at
//! all; a bug is one line and exit code 101; Ctrl-C keeps what finished and exits with 130.
//!
//! Cargo builds the binary of this crate first and names it in `CARGO_BIN_EXE_kernbench`. The README's
//! samples are checked against the binary in [`readme`]; [`sol`] checks the speed-of-light ratio through
//! the library `bench` runs on; [`compare`] checks `--compare`, beside an nccl-tests log.

mod compare;
mod processes;
mod props;
mod readme;
mod sol;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kernbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernbench")).args(args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A scratch directory for this test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli").join(test);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The names of the files in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A small system file: 2 SIPs of 1x2 cubes of 4 PEs.
const SMALL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/small_2sip.json");

#[test]
fn every_bad_invocation_gives_one_line_and_exit_code_2() {
    let dir = scratch("bad");
    let malformed = write(&dir, "malformed.json", "{\"sips\": 4,");
    let zero = write(&dir, "zero.json", r#"{"sips": 0, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#);
    let unknown_field =
        write(&dir, "field.json", r#"{"sips": 2, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "speed": 9}"#);
    let bad_registry =
        write(&dir, "registry.json", r#"{"algorithms": {}, "selection": {"all_reduce": [{"algorithm": "x"}]}}"#);
    let missing = dir.join("missing.json");
    let missing = missing.to_str().unwrap();
    let dir_path = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "all_reduc"], "unknown collective `all_reduc`: expected one of all_reduce"),
        (&["tune", "gather"], "unknown collective `gather`"),
        (&["trace", "scatter"], "unknown collective `scatter`"),
        (&["plot", "x"], "unknown collective `x`"),
        (&["run", "x"], "unknown collective `x`"),
        (&["bench", "all_reduce", "--algos", "rign"], "unknown algorithm `rign` for all_reduce: expected all, auto or"),
        (
            &["bench", "all_reduce", "--algos", "ring,ring_allgather"],
            "unknown algorithm `ring_allgather` for all_reduce",
        ),
        (&["plot", "broadcast", "--algos", "ring"], "unknown algorithm `ring` for broadcast"),
        (
            &["bench", "all_reduce", "--algos", "ring:chunks"],
            "bad algorithm variant `ring:chunks`: expected ALGORITHM:KEY=VALUE",
        ),
        (&["bench", "all_reduce", "--algos", "rign:chunks=2"], "unknown algorithm `rign` for all_reduce"),
        (
            &["bench", "all_reduce", "--algos", "ring:chunkz=2"],
            "kernel `ring_allreduce` parameters: unknown field `chunkz`",
        ),
        (&["plot", "all_reduce", "--algos", "ring:chunks=-1"], "kernel `ring_allreduce` parameters: invalid value"),
        (
            &["tune", "all_reduce", "--algos", "ring,hierarchical_allreduce"],
            "`hierarchical_allreduce` is not a candidate for tuning all_reduce here: expected a comma-separated list of [",
        ),
        (&["tune", "all", "--algos", "ring"], "--algos chooses among one collective's algorithms"),
        (&["trace", "all_reduce", "--algo", "nope"], "unknown algorithm `nope` for all_reduce"),
        (&["trace", "all_reduce", "--algo", "ring,tree"], "expected one algorithm of all_reduce, or auto"),
        (&["run", "all_reduce", "--algo", "nope"], "unknown algorithm `nope`"),
        (&["run", "all_reduce", "--algo", "ring_allgather"], "implements all_gather, not all_reduce"),
        (&["plan", "nope"], "unknown algorithm `nope`"),
        (&["bench", "all_reduce", "--sizes", "12Q"], "bad size `12Q`: expected a number of bytes"),
        (&["bench", "all_reduce", "--sizes", "0"], "bad size `0`"),
        (&["bench", "all_reduce", "--sizes", "1M..1K"], "bad size `1M..1K`: expected a range FROM..TO"),
        (&["tune", "all_reduce", "--sizes", "1K,"], "bad size ``"),
        (&["trace", "all_reduce", "--bytes", "lots"], "bad size `lots`"),
        (&["run", "all_reduce", "--bytes=-1"], "bad size `-1`"),
        (&["bench", "all_reduce", "--sizes", "17179869184G"], "bad size `17179869184G`"),
        // Sizes past what a tensor may hold are refused by the memory estimate, before the tensor.
        (&["run", "all_reduce", "--bytes", "8000000000G"], "all_reduce of 8589934592000000000 bytes needs at least"),
        (&["run", "all_to_all", "--layout", "multi_pe", "--bytes", "8000000000G"], "more than the limit of"),
        (&["bench", "all_reduce", "--sizes", "8000000000G"], "more than the limit of"),
        (&["bench", "all_to_all", "--sizes", "8000000000G", "--algos", "all"], "more than the limit of"),
        (&["tune", "all_gather", "--sizes", "8000000000G"], "more than the limit of"),
        (&["trace", "reduce", "--bytes", "8000000000G"], "more than the limit of"),
        (&["plot", "broadcast", "--sizes", "8000000000G"], "more than the limit of"),
        (&["bench", "all_reduce", "--system", missing], "cannot read system spec file"),
        (&["bench", "all_reduce", "--system", &malformed], "invalid system spec: EOF while parsing"),
        (&["plot", "all_reduce", "--system", &zero], "system spec field `sips` is 0"),
        (&["tune", "all_reduce", "--system", &unknown_field], "unknown field `speed`"),
        (&["trace", "all_reduce", "--system", missing], "cannot read system spec file"),
        (&["run", "all_reduce", "--system", &malformed], "invalid system spec"),
        (&["bench", "all_reduce", "--registry", missing], "cannot read registry file"),
        (&["bench", "all_reduce", "--registry", &bad_registry], "unknown algorithm `x`"),
        (&["bench", "all_reduce", "--dtype", "f8"], "unknown dtype `f8`"),
        (&["bench", "all_reduce", "--op", "xor"], "unknown reduction op `xor`"),
        (
            &["bench", "alltoallv", "--counts-seed", "seven"],
            "invalid value 'seven' for '--counts-seed <SEED>': `seven` is not a seed: expected a whole number from 0 to",
        ),
        (&["run", "alltoallv", "--counts-seed=-1"], "`-1` is not a seed: expected a whole number"),
        (
            &["run", "all_reduce", "--placement", "halved"],
            "`halved` is not a placement: expected auto, whole or divided",
        ),
        (
            &["trace", "all_reduce", "--bytes", "4K", "--placement", "divided"],
            "cannot place its transfers divided over its processes: a traced run keeps every channel's transfers in every process; use Placement::Whole or Auto (on the command line, --placement whole or auto)",
        ),
        (&["bench", "reduce", "--root", "9", "--sizes", "1K"], "root 9 does not exist"),
        (&["bench"], "required arguments were not provided: <COLLECTIVE>"),
        (&["bench", "all_reduce", "--json=yes"], "unexpected value"),
        (&["bnech"], "unrecognized subcommand 'bnech'"),
        (
            &[],
            "missing subcommand: expected one of run, bench, tune, trace, plot, explain, msccl, calibrate, workload, list, plan",
        ),
        (&["workload", missing], "cannot read"),
        (&["workload", &malformed], "is not a workload in kernbench's JSON form"),
        (&["workload", "../configs/workloads/data-parallel.json", "--gpu-gflops=0"], "bad --gpu-gflops 0"),
        (
            &["run", "all_reduce", "--fault", "link=0-1:fial"],
            "`fial` is not an effect: expected `fail` or `slow=FACTOR`",
        ),
        (&["run", "all_reduce", "--fault", "link=0-2:fail"], "no link joins 0 and 2"),
        (&["run", "all_reduce", "--faults", missing], "cannot read faults file"),
        (&["calibrate", "--out", "fitted.json"], "required arguments were not provided: <LOG>"),
        (&["calibrate", "/nonexistent/h100.log", "--out", "fitted.json"], "/nonexistent/h100.log"),
        (
            &["calibrate", "../configs/logs/h100x8-all_reduce-together-ring.log", "--out", "fitted.json"],
            "the system has 4 SIPs: give a system of 8 SIPs (--system)",
        ),
        (
            &["calibrate", "../configs/logs/h100x8-all_reduce-together-ring.log", "--out", "/nonexistent/dir/f.json"],
            "cannot write `/nonexistent/dir/f.json`",
        ),
        (&["explain", "all_reduce"], "required arguments were not provided: <SIZE>"),
        (&["explain", "all_reduc", "1K"], "unknown collective `all_reduc`"),
        (&["explain", "all_reduce", "1Q"], "bad size `1Q`"),
        (
            &["tune", "all_reduce", "--out", "/nonexistent/dir/r.json"],
            "cannot write `/nonexistent/dir/r.json`: no directory",
        ),
        (&["tune", "all_reduce", "--rules-csv", "/nonexistent/r.csv"], "cannot write `/nonexistent/r.csv`"),
        (&["tune", "all_reduce", "--nccl-tuner", "/nonexistent/n.conf"], "cannot write `/nonexistent/n.conf`"),
        (&["trace", "all_reduce", "--out", "/nonexistent/t.json"], "cannot write `/nonexistent/t.json`"),
        (&["plot", "all_reduce", "--out", dir_path], "it is a directory: expected a file name"),
        (&["run", "all_reduce", "--max-memory", "lots"], "bad --max-memory: bad size `lots`"),
        (
            &["run", "all_reduce", "--bytes", "1M", "--max-memory", "1M"],
            "needs at least 76.00 MiB of memory, more than the limit of 1.00 MiB",
        ),
        (&["bench", "all_reduce", "--sizes", "1M", "--max-memory", "1M"], "more than the limit of 1.00 MiB"),
        (&["tune", "all_reduce", "--sizes", "1M", "--max-memory", "1M"], "more than the limit of 1.00 MiB"),
        (&["trace", "all_reduce", "--max-memory", "1M"], "more than the limit of 1.00 MiB"),
        (&["plot", "all_reduce", "--sizes", "1M", "--max-memory", "1M"], "more than the limit of 1.00 MiB"),
    ];
    for (args, want) in cases {
        let out = kernbench(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "kernbench {args:?}: exit {:?}, stderr {stderr}", out.status.code());
        assert!(!stderr.contains("panicked"), "kernbench {args:?} panicked: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "kernbench {args:?}: not one line:\n{stderr}");
        assert!(stderr.starts_with("kernbench: "), "kernbench {args:?}: {stderr}");
        assert!(stderr.contains(want), "kernbench {args:?}: expected `{want}` in\n{stderr}");
    }
}

#[test]
fn help_and_version_are_not_errors() {
    for args in [&["--help"][..], &["--version"], &["bench", "--help"]] {
        let out = kernbench(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn bench_prints_an_nccl_tests_table_and_json() {
    let out = kernbench(&["bench", "all_reduce", "--system", SMALL, "--sizes", "1K..4K", "--algos", "ring,auto"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 6, "{stdout}");
    let header = stdout.lines().find(|l| l.contains("busbw")).expect("a header");
    for column in ["size", "count", "type", "redop", "algorithm", "time", "algbw", "busbw", "#wrong", "sol"] {
        assert!(header.contains(column), "no {column} in {header}");
    }
    assert!(lines[0].trim_start().starts_with("1024 ") && lines[1].contains("auto: "), "{stdout}");
    // No progress bar when stderr is not a terminal.
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    let out = kernbench(&["bench", "broadcast", "--system", SMALL, "--sizes", "1K,64K", "--algos", "all", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(json["collective"], "broadcast");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2);
    for row in rows {
        for key in ["size", "count", "dtype", "op", "algorithm", "time_ns", "algbw_gbps", "busbw_gbps", "wrong", "sol"]
        {
            assert!(row.get(key).is_some(), "no {key} in {row}");
        }
        // Broadcast's busbw factor is 1.
        assert_eq!(row["algbw_gbps"], row["busbw_gbps"]);
    }
}

#[test]
fn bench_compares_variants_of_an_algorithms_parameters_in_one_table() {
    let algos = "ring:chunks=1,ring:chunks=3";
    let out = kernbench(&["bench", "all_reduce", "--system", SMALL, "--sizes", "64K", "--algos", algos, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["algorithm"].as_str().unwrap()).collect();
    assert_eq!(labels, ["ring:chunks=1", "ring:chunks=3"]);
    assert!(rows.iter().all(|r| r["wrong"] == 0), "{rows:?}");
    // Other parameters are other runs: three chunks take another time than one.
    assert_ne!(rows[0]["time_ns"], rows[1]["time_ns"], "{rows:?}");
}

#[test]
fn tune_writes_a_registry_that_bench_and_run_load() {
    let dir = scratch("tune");
    let (registry, rules, nccl) = (dir.join("registry.json"), dir.join("rules.csv"), dir.join("nccl_tuner.conf"));
    let (registry, rules, nccl) = (registry.to_str().unwrap(), rules.to_str().unwrap(), nccl.to_str().unwrap());
    let sizes = "1K,64K,1M";
    let args = [
        "tune",
        "all_reduce",
        "--system",
        SMALL,
        "--sizes",
        sizes,
        "--out",
        registry,
        "--rules-csv",
        rules,
        "--nccl-tuner",
        nccl,
    ];
    let out = kernbench(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# fastest per size"), "{stdout}");
    let rules = std::fs::read_to_string(rules).unwrap();
    assert!(rules.starts_with("# collective,min_bytes,max_bytes,algorithm,layout,sips\n"), "{rules}");
    assert!(rules.lines().skip(1).all(|l| l.starts_with("all_reduce,") && l.split(',').count() == 6), "{rules}");
    let nccl = std::fs::read_to_string(nccl).unwrap();
    assert!(
        nccl.contains("# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,"),
        "{nccl}"
    );
    let lines: Vec<&str> = nccl.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(lines.iter().all(|l| l.starts_with("allreduce,") && l.split(',').count() == 10), "{nccl}");

    let out =
        kernbench(&["bench", "all_reduce", "--system", SMALL, "--sizes", sizes, "--registry", registry, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = kernbench(&["bench", "all_reduce", "--system", SMALL, "--sizes", sizes, "--algos", "all", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in json["rows"].as_array().unwrap() {
        let best = all["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["size"] == row["size"] && r["ranks"] == row["ranks"])
            .map(|r| r["time_ns"].as_f64().unwrap())
            .fold(f64::MAX, f64::min);
        assert!(row["time_ns"].as_f64().unwrap() <= 1.01 * best, "{row} vs {best}");
    }
    let out = kernbench(&["run", "all_reduce", "--system", SMALL, "--registry", registry, "--bytes", "64K"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ns simulated"), "{}", text(&out.stdout));
}

#[test]
fn trace_and_plot_write_their_files() {
    let dir = scratch("files");
    let (trace, svg) = (dir.join("trace.json"), dir.join("busbw.svg"));
    let out =
        kernbench(&["trace", "all_reduce", "--system", SMALL, "--bytes", "64K", "--out", trace.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("open it at ui.perfetto.dev"), "{}", text(&out.stdout));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(json["traceEvents"].as_array().is_some_and(|e| !e.is_empty()));

    let args = ["plot", "all_gather", "--system", SMALL, "--sizes", "1K..8K", "--out", svg.to_str().unwrap()];
    let out = kernbench(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let svg = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("the plot is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(str::trim).collect();
    for algorithm in ["ring_allgather", "recursive_doubling_allgather", "bruck_allgather"] {
        assert_eq!(texts.iter().filter(|t| **t == algorithm).count(), 1, "{algorithm} in the legend: {texts:?}");
    }
}

#[test]
fn run_all_to_all_on_every_pe_sizes_whole_blocks_for_every_participant() {
    // The built-in system's 512 PEs: 1K and 64K per SIP do not split into 512 blocks per PE unless
    // rounded up as a sweep's points are.
    let out = kernbench(&["run", "all_to_all", "--layout", "multi_pe", "--bytes", "1K,64K"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("hierarchical_all_to_all_pes on 512 PEs").count(), 2, "{stdout}");
    assert_eq!(stdout.matches(": correct,").count(), 2, "{stdout}");
}

#[test]
fn run_prints_simulated_time() {
    let out = kernbench(&["run", "all", "--system", SMALL, "--bytes", "1K"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("ns simulated").count(), kernbench::Collective::ALL.len(), "{stdout}");
}

#[test]
fn explain_names_the_rule_that_chose_and_times_every_algorithm_or_says_why_it_cannot_run() {
    let dir = scratch("explain");
    // `odd` runs the ring kernel on every PE but validates as one shard per SIP: it never runs.
    let registry = write(
        &dir,
        "registry.json",
        r#"{"algorithms": {
          "ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d", "mapper": "leader_only",
                   "validator": "single_shard", "buffer_kind": "hbm", "params": {"chunks": 4}},
          "odd": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d", "mapper": "all_pes",
                  "validator": "single_shard", "buffer_kind": "hbm", "params": {"chunks": 4}},
          "ring_allgather": {"collective": "all_gather", "kernel": "ring_allgather", "topology": "ring_1d",
                   "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm", "params": {"chunks": 2}}},
         "selection": {"all_reduce": [{"algorithm": "odd", "max_bytes": 1024}, {"algorithm": "ring"}, {"algorithm": "odd"}]}}"#,
    );
    let out = kernbench(&["explain", "all_reduce", "1K", "--system", SMALL, "--registry", &registry]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "all_reduce of 1024 bytes per SIP (one-PE layout) on 2 SIPs x 1x2 cubes x 4 PEs", "{stdout}");
    assert_eq!(lines[2], "  1. odd (max_bytes 1024): matches, but the algorithm does not take the tensor", "{stdout}");
    assert_eq!(lines[3], "  2. ring (always): matches: chosen", "{stdout}");
    assert_eq!(lines[4], "  3. odd (always): matches, not reached", "{stdout}");
    assert!(lines[5].starts_with("chosen: ring [rule 2 of all_reduce (ring): no conditions"), "{stdout}");
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} row in\n{stdout}"))
    };
    assert!(row("odd").contains("cannot run: odd cannot run on this tensor: validator `single_shard`"), "{stdout}");
    let ring: Vec<&str> = row("ring").split_whitespace().collect();
    assert_eq!((ring[1], ring[4]), ("2", "chosen"), "{stdout}");
    assert!(ring[2].parse::<f64>().unwrap() > 0.0, "{stdout}");
    assert!(!stdout.contains("ring_allgather"), "only all_reduce's algorithms: {stdout}");
}

/// `kernbench args` started with its stdout and stderr piped.
#[test]
fn every_rounded_size_is_announced_on_one_line() {
    let trace = scratch("rounded").join("trace.json");
    let trace = trace.to_str().unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["run", "all_reduce", "--system", SMALL, "--bytes", "3"],
            "size 3 runs as 4 bytes: whole f32 elements",
            "4 bytes per rank",
        ),
        (
            &["bench", "all_reduce", "--system", SMALL, "--sizes", "1026"],
            "size 1026 runs as 1024 bytes: whole f32 elements",
            "  1024 ",
        ),
        (
            &["run", "all_to_all", "--layout", "multi_pe", "--bytes", "1"],
            "size 1 runs as 262144 bytes: whole f32 elements; whole elements on each of a SIP's 128 PEs holding data; whole blocks for each of the 512 ranks",
            // 262144 bytes on each SIP, over its 128 PEs: the ranks.
            "2048 bytes per rank",
        ),
        (
            &["trace", "broadcast", "--system", SMALL, "--bytes", "6", "--dtype", "i64", "--out", trace],
            "size 6 runs as 8 bytes: whole i64 elements",
            "8 bytes per rank",
        ),
    ];
    for (args, note, ran) in cases {
        let out = kernbench(args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "kernbench {args:?}: {stderr}");
        assert_eq!(notes(&stderr), format!("kernbench: {note}\n"), "kernbench {args:?}");
        assert!(stdout.contains(ran), "kernbench {args:?}: no `{ran}` in {stdout}");
    }
    let out = kernbench(&["run", "all", "--system", SMALL, "--bytes", "1K"]);
    let stderr = text(&out.stderr);
    assert!(notes(&stderr).is_empty(), "a size that runs as asked is not announced: {stderr}");
}

/// `stderr` without the peak memory `run` says after each call.
fn notes(stderr: &str) -> String {
    stderr.lines().filter(|l| !l.contains(": peak memory so far ")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn an_error_naming_many_valid_algorithms_stays_short() {
    let dir = scratch("many");
    let algorithms: Vec<String> = (1..=40)
        .map(|i| {
            format!(
                r#""ring_chunks_{i}": {{"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
                "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm", "params": {{"chunks": {i}}}}}"#
            )
        })
        .collect();
    let registry = write(
        &dir,
        "registry.json",
        &format!(
            r#"{{"algorithms": {{{}}}, "selection": {{"all_reduce": [{{"algorithm": "ring_chunks_1"}}]}}}}"#,
            algorithms.join(",")
        ),
    );
    for args in [
        &["bench", "all_reduce", "--system", SMALL, "--registry", &registry, "--algos", "nope"][..],
        &["run", "all_reduce", "--system", SMALL, "--registry", &registry, "--algo", "nope"],
        &["plan", "nope"],
    ] {
        let out = kernbench(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "kernbench {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "kernbench {args:?}: {stderr}");
        assert!(stderr.len() < 300, "kernbench {args:?}: {} characters: {stderr}", stderr.len());
        assert!(stderr.contains("unknown algorithm `nope`"), "kernbench {args:?}: {stderr}");
        assert!(stderr.contains("more; see kernbench list)"), "kernbench {args:?}: {stderr}");
    }
    let out = kernbench(&["bench", "all_reduce", "--system", SMALL, "--registry", &registry, "--algos", "nope"]);
    assert!(text(&out.stderr).contains("[ring_chunks_1, ring_chunks_10, "), "{}", text(&out.stderr));
}

#[test]
fn an_output_through_a_symbolic_link_or_into_a_pipe_keeps_the_link_and_the_pipe() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("links");
    for name in files_in(&dir) {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let real = write(&dir, "real.svg", "old contents\n");
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = kernbench(&["plot", "all_reduce", "--system", SMALL, "--sizes", "1K", "--out", link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::read_to_string(&real).unwrap().starts_with("<svg"), "the link's file was not written");

    let pipe = dir.join("pipe");
    let path = std::ffi::CString::new(pipe.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path and makes a named pipe there.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let reader = {
        let pipe = pipe.clone();
        // Opening a pipe for reading waits for a writer; a reader sees one stream, the whole trace.
        std::thread::spawn(move || std::fs::read_to_string(&pipe).unwrap())
    };
    let out = kernbench(&["trace", "all_reduce", "--system", SMALL, "--bytes", "1K", "--out", pipe.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(reader.join().unwrap().starts_with("{\"traceEvents\""));
    assert!(std::fs::metadata(&pipe).unwrap().file_type().is_fifo(), "the pipe was replaced");
}

#[test]
fn run_and_bench_take_and_say_an_all_gathers_size_as_its_gathered_output() {
    let out = kernbench(&["run", "all_gather", "--system", SMALL, "--bytes", "1K"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // 2 SIPs: each puts in half of the 1K gathered output (the rule compares that half), and the
    // report says the size as bench does.
    let stdout = text(&out.stdout);
    assert!(stdout.contains(" on 2 PEs, 1024 bytes per rank,"), "{stdout}");
    assert!(stdout.contains("bytes 512 <= max_bytes 16384"), "{stdout}");
    let out = kernbench(&["bench", "all_gather", "--system", SMALL, "--sizes", "1K", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &json["rows"][0];
    assert_eq!((&row["size"], &row["bytes_per_rank"], &row["ranks"]), (&1024.into(), &512.into(), &2.into()), "{row}");
    assert!(out.stderr.is_empty(), "1K gathers evenly: {}", text(&out.stderr));
}

#[test]
fn a_run_that_does_not_fit_in_the_available_memory_is_refused_at_once() {
    use kernbench::estimate::peak_memory;
    use kernbench_cli::memory::available;
    // 8 GiB on each of the built-in system's 4 SIPs.
    let estimate = peak_memory(kernbench::Collective::AllReduce, 4, 8 << 30);
    let limit = available().expect("/proc/meminfo says how much memory is available");
    assert!(estimate > limit, "this machine has room for the run ({limit} bytes available): the test needs less");
    let started = std::time::Instant::now();
    let out = kernbench(&["run", "all_reduce", "--bytes", "8G"]);
    let stderr = text(&out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line:\n{stderr}");
    // Refused before it is planned, on the least memory any algorithm needs: here the data's peak.
    let both = format!("needs at least {} of memory, more than the limit of ", kernbench::estimate::human(estimate));
    assert!(stderr.contains(&both), "expected `{both}` in\n{stderr}");
}

#[test]
fn a_timing_only_run_of_sixteen_million_pes_too_large_for_the_limit_is_refused_before_it_is_planned() {
    // 4,096 SIPs of 16x16 cubes of 16 PEs: its plan and its layout's map of shards would take seconds
    // and gigabytes to make, only to be refused. Below the least a lane and a PE state each take.
    use kernbench::estimate::{Checking, floor, human};
    let least = floor(kernbench::Collective::AllReduce, 1 << 24, 1 << 14, Checking::TimingOnly);
    assert!(least > 8 << 30, "{least}");
    let dir = scratch("sixteen_million");
    let spec = r#"{"sips": 4096, "mesh": {"w": 16, "h": 16}, "pes_per_cube": 16}"#;
    let system = write(&dir, "huge.json", spec);
    let args = ["run", "all_reduce", "--algo", "hierarchical_allreduce", "--layout", "multi_pe", "--bytes", "64M"];
    let started = std::time::Instant::now();
    let out = kernbench(&[&args[..], &["--timing-only", "--max-memory", "8G", "--system", &system]].concat());
    let stderr = text(&out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    let refused = format!("needs at least {} of memory, more than the limit of 8.00 GiB", human(least));
    assert!(stderr.contains(&refused), "expected `{refused}` in\n{stderr}");
}

#[test]
fn a_ring_on_4096_sips_is_refused_for_its_messages_at_once_unless_allowed() {
    let dir = scratch("messages");
    let system = write(&dir, "ring4096.json", r#"{"sips": 4096, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#);
    let started = std::time::Instant::now();
    let out = kernbench(&["run", "all_reduce", "--algo", "ring", "--bytes", "1K", "--system", &system]);
    let stderr = text(&out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line:\n{stderr}");
    let bound = "ring on 4096 participants would send an estimated 268369920 messages, more than the limit of \
                 67108864: use fewer SIPs, another algorithm, or raise the limit";
    assert!(stderr.contains(bound), "expected `{bound}` in\n{stderr}");
    // The same limit, lowered, refuses a small ring too; raised, lets it run.
    let small = ["run", "all_reduce", "--algo", "ring", "--bytes", "1K", "--system", SMALL];
    let out = kernbench(&[&small[..], &["--max-messages", "31"]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("an estimated 32 messages, more than the limit of 31"), "{}", text(&out.stderr));
    let out = kernbench(&[&small[..], &["--max-messages", "32"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_decoding_error_is_one_line_though_the_decoder_is_its_source() {
    // The decoder's own message quotes the name whole, across two lines; the error's, escaped.
    let dir = scratch("decoder");
    let registry = write(&dir, "registry.json", "{\"algorithms\": {}, \"selection\": {}, \"x\\ny\": 1}");
    let out = kernbench(&["run", "all_reduce", "--registry", &registry]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line:\n{stderr}");
    assert!(stderr.contains("unknown field `x\\ny`, expected `algorithms` or `selection`"), "{stderr}");
    assert_eq!(stderr.matches("unknown field").count(), 1, "the decoder's message is said once: {stderr}");
}

#[test]
fn run_says_the_peak_memory_after_each_call_on_stderr() {
    let out = kernbench(&["run", "all", "--bytes", "1K"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let peaks: Vec<&str> = stderr.lines().filter(|l| l.contains("peak memory so far")).collect();
    assert_eq!(peaks.len(), kernbench::Collective::ALL.len(), "one line per collective:\n{stderr}");
    assert!(peaks[0].starts_with("kernbench: all_reduce #1: peak memory so far "), "{stderr}");
    assert!(peaks.iter().all(|l| l.ends_with("MiB") || l.ends_with("KiB")), "a size: {stderr}");
}

const MSCCL_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/msccl");

#[test]
fn msccl_runs_an_xml_file_and_says_it_is_correct() {
    let ring = format!("{MSCCL_FIXTURES}/ring_allreduce.xml");
    let out = kernbench(&["msccl", &ring, "--sizes", "1K,64K"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("`ring_allreduce`, all_reduce over 4 ranks, 4 chunks, 4 thread blocks, protocol Simple"),
        "{stdout}"
    );
    assert!(stdout.contains("on 4 SIPs x 1x1 cubes x 1 PEs"), "the default system is one SIP per GPU: {stdout}");
    let rows = stdout.lines().filter(|l| !l.starts_with('#') && l.contains(" ring_allreduce "));
    assert_eq!(rows.count(), 2, "{stdout}");
    assert!(stdout.ends_with("# correct at every size\n"), "{stdout}");
    // The JSON rows are bench's, `wrong` included.
    let out = kernbench(&["msccl", &ring, "--sizes", "1K", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["wrong"], 0);
    assert_eq!(json["rows"][0]["algorithm"], "ring_allreduce");
}

#[test]
fn msccl_says_which_executors_would_refuse_a_file() {
    // The ring fuses receive-reduce-send steps, which RCCL's MSCCL kernels are built without.
    let out = kernbench(&["msccl", &format!("{MSCCL_FIXTURES}/ring_allreduce.xml"), "--sizes", "1K"]);
    assert!(text(&out.stdout).contains("# RCCL would refuse it: "), "{}", text(&out.stdout));
}

#[test]
fn msccl_fails_on_a_wrong_algorithm_and_on_a_bad_file() {
    let dir = scratch("msccl-wrong");
    // A ring whose rank 0 stores its last chunk in the wrong place.
    let ring = std::fs::read_to_string(format!("{MSCCL_FIXTURES}/ring_allreduce.xml")).unwrap();
    let last_recv = ring.find("type=\"r\" ").expect("the ring ends with a receive");
    let at = last_recv + ring[last_recv..].find("dstoff=\"").unwrap() + "dstoff=\"".len();
    let digit = &ring[at..at + 1];
    let other = if digit == "0" { "1" } else { "0" };
    let wrong = format!("{}{other}{}", &ring[..at], &ring[at + 1..]);
    let file = dir.join("wrong.xml");
    std::fs::write(&file, wrong).unwrap();
    let out = kernbench(&["msccl", file.to_str().unwrap(), "--sizes", "1K"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("broke the all_reduce postcondition at 1 of 1 sizes"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let bad = dir.join("bad.xml");
    std::fs::write(&bad, ring.replacen("type=\"s\"", "type=\"send\"", 1)).unwrap();
    let out = kernbench(&["msccl", bad.to_str().unwrap(), "--sizes", "1K"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("send"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn run_exact_says_every_element_holds_each_contribution_once() {
    let out = kernbench(&["run", "all_reduce", "--system", SMALL, "--bytes", "1K", "--exact"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(": correct (exact: every element holds each of its contributions once), "), "{stdout}");
    let out = kernbench(&["run", "all_reduce", "--system", SMALL, "--bytes", "1K"]);
    assert!(!text(&out.stdout).contains("exact"), "without --exact nothing is said of it");
}

/// The rows of a `bench` table (its lines that are not comments), each split into its columns.
fn table_rows(table: &str) -> Vec<Vec<&str>> {
    table.lines().filter(|l| !l.starts_with('#')).map(|l| l.split_whitespace().collect()).collect()
}

#[test]
fn bench_alltoallv_and_sendrecv_print_nccl_tests_rows_for_every_algorithm_with_nothing_wrong() {
    // (collective, its algorithms, nccl-tests' busbw factor on the built-in system's 4 ranks)
    let cases = [
        ("alltoallv", ["pairwise_alltoallv", "symmetric_alltoallv"], 0.75),
        ("sendrecv", ["pairwise_sendrecv", "symmetric_sendrecv"], 1.0),
    ];
    for (collective, algorithms, factor) in cases {
        let out = kernbench(&["bench", collective, "--algos", "all", "--exact"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let table = text(&out.stdout);
        let rows = table_rows(&table);
        // 1K..16M: 15 sizes, each for both algorithms.
        assert_eq!(rows.len(), 15 * 2, "{table}");
        for row in &rows {
            let [size, count, dtype, op, ranks, algorithm, _time, algbw, busbw, wrong, sol] = row[..] else {
                panic!("not an nccl-tests row of 11 columns: {row:?}\n{table}");
            };
            assert_eq!((dtype, op, ranks, wrong), ("f32", "sum", "4", "0"), "{row:?}");
            assert_eq!(size.parse::<u64>().unwrap(), 4 * count.parse::<u64>().unwrap(), "{row:?}");
            assert!(algorithms.contains(&algorithm), "{row:?}");
            let (algbw, busbw): (f64, f64) = (algbw.parse().unwrap(), busbw.parse().unwrap());
            assert!((busbw - algbw * factor).abs() <= 0.011, "busbw {busbw} is not {factor} x algbw {algbw}: {row:?}");
            assert!(sol.parse::<f64>().unwrap() <= 1.0, "{row:?}");
        }
        assert!(table.contains("# wrong elements: 0\n"), "{table}");
    }
    // Another seed draws other counts, so other times for the same sizes.
    let time = |seed: &str| {
        let out = kernbench(&[
            "bench",
            "alltoallv",
            "--sizes",
            "64K",
            "--algos",
            "pairwise_alltoallv",
            "--counts-seed",
            seed,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        table_rows(&text(&out.stdout))[0][6].to_owned()
    };
    assert_eq!(time("1"), time("1"));
    assert_ne!(time("1"), time("2"));
}

#[test]
fn bench_and_msccl_check_exactly_on_request() {
    let out =
        kernbench(&["bench", "all_reduce", "--system", SMALL, "--sizes", "1K", "--algos", "ring", "--json", "--exact"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["wrong"], 0);
    let ring = format!("{MSCCL_FIXTURES}/ring_allreduce.xml");
    let out = kernbench(&["msccl", &ring, "--sizes", "1K", "--exact"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with("# correct at every size\n"));
}

#[test]
fn a_timing_only_sweep_says_it_checked_nothing_in_the_table_the_json_and_the_run_line() {
    let out = kernbench(&["bench", "all_reduce", "--algos", "ring", "--sizes", "1K,1G", "--timing-only"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let rows: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows.iter().all(|row| row.split_whitespace().nth(9) == Some("-")), "#wrong reads -:\n{table}");
    assert!(table.contains("# wrong elements: - (not checked: timing only)"), "{table}");
    let out = kernbench(&["bench", "all_reduce", "--algos", "ring", "--sizes", "1K", "--timing-only", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"][0]["checked"], false, "{doc}");
    let out = kernbench(&["run", "broadcast", "--bytes", "4G", "--timing-only"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4294967296 bytes per rank, op sum: not checked: timing only, "),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn timing_only_and_exact_together_are_one_line_and_exit_code_2() {
    for args in [
        &["run", "all_reduce", "--timing-only", "--exact"][..],
        &["bench", "all_reduce", "--timing-only", "--exact"],
        &[
            "msccl",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/msccl/ring_allreduce.xml"),
            "--timing-only",
            "--exact",
        ],
    ] {
        let out = kernbench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            "kernbench: --exact checks the outputs, which --timing-only does not make: choose one of them\n"
        );
    }
}

#[test]
fn an_msccl_file_runs_timing_only_in_the_times_it_takes_with_data() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/msccl/ring_allreduce.xml");
    let with_data = kernbench(&["msccl", file, "--sizes", "1K,1M", "--json"]);
    let timing_only = kernbench(&["msccl", file, "--sizes", "1K,1M", "--json", "--timing-only"]);
    let rows = |out: &Output| -> Vec<f64> {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["rows"].as_array().unwrap().iter().map(|r| r["time_ns"].as_f64().unwrap()).collect()
    };
    assert!(with_data.status.success() && timing_only.status.success(), "{}", text(&timing_only.stderr));
    assert_eq!(rows(&with_data), rows(&timing_only));
}

#[test]
fn run_under_seeded_schedules_says_whether_any_changes_the_outputs_and_a_seed_replays() {
    let out = kernbench(&["run", "all_reduce", "--algo", "symmetric_one_shot", "--bytes", "1K", "--schedules", "3"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("schedules: 3 seeded orders of same-time operations give the same outputs"), "{stdout}");
    let plain = text(&kernbench(&["run", "all_reduce", "--algo", "symmetric_one_shot", "--bytes", "1K"]).stdout);
    let replayed =
        kernbench(&["run", "all_reduce", "--algo", "symmetric_one_shot", "--bytes", "1K", "--schedule", "2"]);
    assert_eq!(text(&replayed.stdout), plain);
}
