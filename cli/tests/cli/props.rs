//! Properties of the command line as a library: argument lists drawn from a vocabulary of subcommands,
//! flags and values, good and bad, either fail to parse or run without panicking, and every error they
//! end in has a chain of messages without a newline (the binary joins the chain into its one line,
//! leaving out a JSON decoder's own message, which its parent quotes escaped).
//!
//! Only small work runs: sizes up to 64K, the shipped small systems, and every output in a scratch
//! directory, so a few hundred cases take seconds.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use kernbench_cli::args::Cli;
use kernbench_cli::commands;
use proptest::prelude::*;
use proptest::sample::select;

use crate::{scratch, write};

/// Files the generated arguments name: good and bad systems and registries, made once per run.
struct Files {
    systems: Vec<String>,
    registries: Vec<String>,
    /// nccl-tests logs: first an all-reduce on 2 GPUs and an all-gather on 4, as many as the good
    /// systems have SIPs.
    logs: Vec<String>,
    outputs: Vec<String>,
    /// The shipped registry.
    ccl: String,
}

fn files() -> &'static Files {
    static FILES: std::sync::OnceLock<Files> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let dir = scratch("props");
        let shipped = |name: &str| format!("{}/../configs/systems/{name}", env!("CARGO_MANIFEST_DIR"));
        let missing = dir.join("missing.json").to_str().unwrap().to_owned();
        // The good systems three times as often as each bad one, so that most lists run.
        let good = [shipped("small_2sip.json"), shipped("fully_connected.json")];
        let systems = vec![
            good[0].clone(),
            good[1].clone(),
            good[0].clone(),
            good[1].clone(),
            good[0].clone(),
            good[1].clone(),
            write(&dir, "malformed.json", "{\"sips\": 4,"),
            write(&dir, "zero.json", r#"{"sips": 0, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#),
            write(&dir, "newline.json", r#"{"sip\ns": 2, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#),
            write(&dir, "long.json", &format!(r#"{{"{}": 2}}"#, "k".repeat(3000))),
            missing.clone(),
        ];
        let registries = vec![
            write(&dir, "rule.json", r#"{"algorithms": {}, "selection": {"all_reduce": [{"algorithm": "x"}]}}"#),
            write(&dir, "kernel.json", &shipped_ccl().replacen("\"ring_reduce\"", "\"a\\nb\"", 1)),
            missing,
        ];
        let log = |collective: &str, ranks: usize| {
            let rank = |r| format!("#  Rank {r} Group  0 Pid  7 on a device {r} [0x18] GPU\n");
            let rows = "1024 256 float sum -1 10.0 0.1 0.1 0 10.5 0.1 0.1 0\n3 1 float sum -1 9.0 0 0 0 30.0 0 0 0\n";
            let text = (0..ranks).map(rank).collect::<String>() + rows;
            write(&dir, &format!("x{ranks}-{collective}.log"), &text)
        };
        let logs = vec![
            log("all_reduce", 2),
            log("all_gather", 4),
            log("broadcast", 8),
            write(&dir, "garbage.log", "# Collective test starting: all_reduce_perf\n1024 256 float\n"),
            dir.join("missing.log").to_str().unwrap().to_owned(),
        ];
        // The directory itself last: a clean list never names it.
        let outputs = ["out.json", "rules.csv", "nccl.conf", "busbw.svg", "trace.json"]
            .map(|name| dir.join(name).to_str().unwrap().to_owned())
            .into_iter()
            .chain([dir.to_str().unwrap().to_owned()])
            .collect();
        let ccl = format!("{}/../algorithms/ccl.json", env!("CARGO_MANIFEST_DIR"));
        Files { systems, registries, logs, outputs, ccl }
    })
}

/// The shipped registry's text, read from the workspace (the CLI does not depend on the algorithms).
fn shipped_ccl() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/ccl.json")).unwrap()
}

/// A vocabulary: the good values, then the bad ones.
type Words = (&'static [&'static str], &'static [&'static str]);

const SUBCOMMANDS: Words = (&["run", "bench", "tune", "trace", "plot", "explain", "list", "plan"], &["bnech"]);
const COLLECTIVES: Words = (
    &["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "all"],
    &["all_reduc", "", "all\nreduce"],
);
/// Sizes, good and bad; the good ones are small, and the huge ones are refused before any work.
const SIZES: Words = (
    &["3", "1K", "64K", "1K..4K", "1K,4K"],
    &["0", "4K..1K", "1K,", "", "-1", "abc", "99999999999G", "8000000000G", "1\nK"],
);
const ALGORITHMS: Words =
    (&["auto", "all", "ring", "tree", "ring,tree", "ring,auto"], &["ring_allgather", "nope", "", "ri\nng"]);
const DTYPES: Words = (&["f32", "f16", "bf16", "i32", "i64"], &["f8", "", "f\n32"]);
const OPS: Words = (&["sum", "prod", "max", "min", "avg"], &["xor"]);
const THREADS: Words = (&["1", "2"], &["0", "100000", "-1"]);
const ROOTS: Words = (&["0", "1"], &["7", "18446744073709551615", "18446744073709551616", "-1"]);
const LAYOUTS: Words = (&["one_pe", "multi_pe", "cube_leaders"], &["many_pe", "one\tpe"]);
const MEMORY: Words = (&["1G"], &["1M", "0", "lots"]);
const JUNK: &[&str] = &["--bogus", "-x", "--", "--json=yes", "--all", "--json"];

/// The words to draw from: only the good ones for a clean list, else all.
fn words((good, bad): Words, clean: bool) -> Vec<String> {
    let bad = if clean { &[][..] } else { bad };
    good.iter().chain(bad).map(|&s| s.to_owned()).collect()
}

/// `--flag value` with the value drawn from `values`, or nothing.
fn flag(name: &'static str, values: Vec<String>) -> impl Strategy<Value = Vec<String>> {
    // The flags a list needs to run (see `small`) are there more often than the others.
    let needed = ["--system", "--bytes", "--sizes", "--out"].contains(&name);
    let weight = if needed {
        0.9
    } else if name == "--registry" {
        0.15
    } else {
        0.4
    };
    proptest::option::weighted(weight, select(values))
        .prop_map(move |v| v.map(|v| vec![name.to_owned(), v]).unwrap_or_default())
}

/// An argument list: a subcommand, its positional arguments, flags in any order, and sometimes junk;
/// half of them clean (good words only, and the good systems), which mostly run to the end, half with
/// bad words, which mostly end in an error.
fn arguments() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![words_of(true), words_of(false)]
}

fn words_of(clean: bool) -> impl Strategy<Value = Vec<String>> {
    let f = files();
    let systems = if clean { f.systems[..2].to_vec() } else { f.systems.clone() };
    let outputs = if clean { f.outputs[..f.outputs.len() - 1].to_vec() } else { f.outputs.clone() };
    let positional = (select(words(COLLECTIVES, clean)), select(words(SIZES, clean)));
    let flags = (
        (
            flag("--system", systems),
            flag("--registry", if clean { vec![f.ccl.clone()] } else { f.registries.clone() }),
            flag("--bytes", words(SIZES, clean)),
            flag("--sizes", words(SIZES, clean)),
            flag("--algo", words(ALGORITHMS, clean)),
            flag("--algos", words(ALGORITHMS, clean)),
        ),
        (
            flag("--dtype", words(DTYPES, clean)),
            flag("--op", words(OPS, clean)),
            flag("--threads", words(THREADS, clean)),
            flag("--root", words(ROOTS, clean)),
            flag("--layout", words(LAYOUTS, clean)),
            flag("--max-memory", words(MEMORY, clean)),
        ),
        (
            flag("--out", outputs.clone()),
            flag("--rules-csv", outputs.clone()),
            flag("--nccl-tuner", outputs),
            flag("--compare", if clean { f.logs[..2].to_vec() } else { f.logs.clone() }),
            if clean { Just(None).boxed() } else { proptest::option::weighted(0.15, select(JUNK)).boxed() },
        ),
    );
    let foreign = if clean { Just(false).boxed() } else { proptest::bool::weighted(0.1).boxed() };
    (select(words(SUBCOMMANDS, clean)), positional, flags, foreign, any::<proptest::sample::Index>()).prop_map(
        |(sub, positional, ((a, b, c, d, e, g), (h, i, j, k, l, m), (n, o, p, q, junk)), foreign, at)| {
            let mut args = vec!["kernbench".to_owned(), sub.clone()];
            let (collective, size) = positional;
            if sub != "list" || foreign {
                args.push(collective);
            }
            if sub == "explain" || foreign {
                args.push(size);
            }
            // Mostly the flags the subcommand takes, so that most lists parse and run.
            let takes = |pair: &Vec<String>| foreign || pair.first().is_none_or(|name| accepts(&sub, name));
            for pair in [a, b, c, d, e, g, h, i, j, k, l, m, n, o, p, q].into_iter().filter(takes) {
                args.extend(pair);
            }
            if let Some(junk) = junk {
                let at = 1 + at.index(args.len());
                args.insert(at, junk.to_owned());
            }
            args
        },
    )
}

/// Whether subcommand `sub` takes the flag `name`.
fn accepts(sub: &str, name: &str) -> bool {
    let sim = ["--system", "--registry", "--max-memory", "--threads", "--dtype", "--op"];
    let taken: &[&str] = match sub {
        "run" => &["--algo", "--bytes", "--root", "--layout"],
        "bench" => &["--algos", "--sizes", "--root", "--compare"],
        "tune" => &["--sizes", "--out", "--rules-csv", "--nccl-tuner"],
        "trace" => &["--algo", "--bytes", "--root", "--out"],
        "plot" => &["--algos", "--sizes", "--out", "--compare"],
        "explain" => return ["--system", "--registry"].contains(&name),
        "plan" => return name == "--system",
        _ => return false,
    };
    (taken.contains(&name) || sim.contains(&name)) && !(sub == "trace" && name == "--threads")
}

/// Whether a parsed argument list runs small work only: on a named (small or bad) system, at named
/// (small or refused) sizes, writing only into the scratch directory. The defaults are the built-in
/// 512-PE system, sizes up to 16M and outputs in the working directory.
fn small(args: &[String]) -> bool {
    let has = |name: &str| args.iter().any(|a| a == name);
    match args[1].as_str() {
        "run" | "trace" => has("--system") && has("--bytes") && (args[1] == "run" || has("--out")),
        "bench" | "tune" => has("--system") && has("--sizes"),
        "plot" => has("--system") && has("--sizes") && has("--out"),
        "explain" | "plan" => has("--system"),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn an_argument_list_parses_or_runs_without_panic_and_errors_have_no_newline(args in arguments()) {
        let Ok(cli) = Cli::try_parse_from(&args) else { return Ok(()) };
        if !small(&args) {
            return Ok(());
        }
        let mut out = Vec::new();
        let stop = AtomicBool::new(false);
        let result = catch_unwind(AssertUnwindSafe(|| commands::run(cli, None, &mut out, &stop)));
        let result = result.map_err(|_| TestCaseError::fail(format!("kernbench {args:?} panicked")))?;
        if let Err(e) = result {
            // A JSON decoder's error is its parent's source, and its parent quotes it escaped; the
            // binary leaves the decoder's own message out of its line.
            for cause in e.chain().filter(|cause| !cause.is::<serde_json::Error>()) {
                let message = cause.to_string();
                prop_assert!(!message.contains(['\n', '\r']), "kernbench {:?}: {:?}", args, message);
            }
        }
    }
}

/// The error `args` end in, rendered with its chain as the binary prints it.
fn error_of(args: &[&str]) -> String {
    let cli = Cli::try_parse_from(args).expect("the arguments parse");
    let e = commands::run(cli, None, &mut Vec::new(), &AtomicBool::new(false)).expect_err("the arguments are bad");
    format!("{e:#}")
}

#[test]
fn an_argument_holding_a_newline_is_quoted_escaped_and_a_long_one_cut() {
    let small = &files().systems[0];
    let cases: &[(&[&str], &str)] = &[
        (&["run", "all\nreduce"], r"unknown collective `all\nreduce`"),
        (&["bench", "all_reduce", "--sizes", "1\nK", "--system", small], r"bad size `1\nK`"),
        (&["bench", "all_reduce", "--sizes", "1K", "--dtype", "f\n32", "--system", small], r"unknown dtype `f\n32`"),
        (
            &["bench", "all_reduce", "--sizes", "1K", "--op", "s\num", "--system", small],
            r"unknown reduction op `s\num`",
        ),
        (
            &["bench", "all_reduce", "--sizes", "1K", "--algos", "ri\nng", "--system", small],
            r"unknown algorithm `ri\nng`",
        ),
        (
            &["run", "all_reduce", "--bytes", "1K", "--layout", "one\tpe", "--system", small],
            r"unknown layout `one\tpe`",
        ),
    ];
    // A valid list of 20 algorithms is echoed whole no more than a bad name is.
    let list = vec!["ring"; 20].join(",");
    let cut = format!("bad --algo `{}... (51 more characters)`", &list[..48]);
    let trace: &[&str] = &["trace", "all_reduce", "--algo", &list, "--system", small];
    for (args, want) in cases.iter().copied().chain([(trace, cut.as_str())]) {
        let args: Vec<&str> = ["kernbench"].iter().chain(args.iter()).copied().collect();
        let message = error_of(&args);
        assert!(!message.contains('\n'), "kernbench {args:?}: {message}");
        assert!(message.contains(want), "kernbench {args:?}: expected `{want}` in {message}");
    }
}
