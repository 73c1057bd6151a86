//! The `kernbench` command line: parses arguments and hands them to the library.
//!
//! Exit codes: 0 success (also when the reader of stdout went away, as `kernbench list | head` does),
//! 2 an error (one line on stderr), 101 an internal error (a panic: a bug), 130 interrupted (Ctrl-C).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{CommandFactory, Parser};
use kernbench_cli::args::Cli;
use kernbench_cli::commands;
use kernbench_cli::config::Job;
use kernbench_cli::sweep::Interrupted;

/// mimalloc, asked for each block the cheapest way its alignment allows.
#[global_allocator]
static ALLOCATOR: kernbench_cli::memory::Allocator = kernbench_cli::memory::Allocator;

/// Set in the environment, makes `kernbench` panic before it parses its arguments: a test hook, so that
/// the tests see what a user sees when the CLI has a bug.
const TEST_PANIC: &str = "KERNBENCH_TEST_PANIC";

/// A line on stderr, `kernbench: ` first; if stderr cannot be written there is nowhere left to say
/// anything, and panicking about it would only abort.
macro_rules! say {
    ($($message:tt)*) => {{
        // One write of the whole line: the processes of an MPI job share stderr, and a line written in
        // pieces can interleave with another process's.
        let line = format!("kernbench: {}\n", format_args!($($message)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

/// The longest list of names an error line spells out in full; longer ones are elided.
const LISTED: usize = 6;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(report_panic));
    if std::env::var_os(TEST_PANIC).is_some() {
        panic!("{TEST_PANIC} is set");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // The first Ctrl-C asks the command to stop between points; a second one stops at once, for the
    // commands that run one long call.
    let handler = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    if let Err(e) = handler {
        say!("cannot handle Ctrl-C: {e}");
        return ExitCode::from(2);
    }
    let job = match job() {
        Ok(job) => job,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut out = Stdout(std::io::stdout().lock());
    let result = commands::run(cli, job.clone(), &mut out, &stop).and_then(|()| Ok(out.flush()?));
    // The last handle on the job: MPI is finalised here, before the exit.
    drop(job);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`kernbench list | head`) is not an error of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.chain().any(|cause| cause.is::<Interrupted>()) => {
            say!("{}", one_line(&e));
            ExitCode::from(130)
        }
        Err(e) => {
            say!("{}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The processes of the MPI job this program was started in by `mpirun`, when it has several.
#[cfg(feature = "mpi")]
fn job() -> Result<Job, kernbench::sim::spread::ExchangeError> {
    use kernbench::sim::spread::{Exchange, Mpi};
    if !Mpi::launched() {
        return Ok(None);
    }
    let mpi = Mpi::init()?;
    Ok((mpi.processes() > 1).then(|| Arc::new(mpi) as Arc<dyn Exchange>))
}

/// Without MPI support, a program started by `mpirun` runs the whole job in each process: say so once.
#[cfg(not(feature = "mpi"))]
fn job() -> Result<Job, std::convert::Infallible> {
    let size = std::env::var("OMPI_COMM_WORLD_SIZE").or_else(|_| std::env::var("PMI_SIZE"));
    let first = std::env::var("OMPI_COMM_WORLD_RANK").or_else(|_| std::env::var("PMI_RANK")).is_ok_and(|r| r == "0");
    if size.is_ok_and(|n| n != "1") && first {
        say!(
            "this kernbench was built without MPI support: each process runs the whole job (build with --features mpi)"
        );
    }
    Ok(None)
}

/// A panic as one line naming where it happened (and the backtrace when RUST_BACKTRACE asks for one);
/// the process then exits with Rust's code for a panic, 101.
fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    let place = info.location().map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
    say!("internal error: {}{place}; this is a bug, please report it", message.replace('\n', " "));
    let backtrace = std::backtrace::Backtrace::capture();
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        let _ = writeln!(std::io::stderr(), "{backtrace}");
    }
}

/// Standard output whose errors say that it was standard output that could not be written.
struct Stdout<W>(W);

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(on_stdout)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(on_stdout)
    }
}

fn on_stdout(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

/// Help and version go to stdout as clap writes them; a usage error is one line on stderr, exit code 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match e.print().and_then(|()| std::io::stdout().flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                say!("{}", on_stdout(e));
                ExitCode::from(2)
            }
            _ => ExitCode::SUCCESS,
        };
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = Cli::command().get_subcommands().map(|c| c.get_name().to_owned()).collect();
        say!("missing subcommand: expected one of {} (see kernbench --help)", names.join(", "));
        return ExitCode::from(2);
    }
    // clap's message, up to the usage block, on one line: `error: ... not provided:\n  <COLLECTIVE>`.
    let text = e.to_string();
    let message: Vec<&str> =
        text.lines().map(str::trim).take_while(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
    say!("{} (see kernbench --help)", message.join(" ").trim_start_matches("error: "));
    ExitCode::from(2)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// The error and its causes on one line, skipping a cause its parent's message already quotes, with
/// long lists of names (every algorithm, every rule) cut short. A JSON decoder's error is always
/// quoted by its parent, shortened and escaped, so its own message (a user's name whole, on several
/// lines) is never added.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    let causes = e.chain().filter(|cause| !cause.is::<serde_json::Error>()).map(ToString::to_string);
    for cause in causes {
        if !line.contains(&cause) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&cause);
        }
    }
    // A list in an error that says what was expected is of names `kernbench list` prints.
    let hint = if line.contains("expected") { "; see kernbench list" } else { "" };
    shorten_lists(&line.replace('\n', " "), hint)
}

/// `text` with every list of more than [`LISTED`] items, separated by `; ` or `, ` outside brackets or
/// inside one pair, cut to its first items, a count of the rest and its last item:
/// `[a, b, c, d, e, ... (12 more; see kernbench list), z]`, with `hint` after the count.
fn shorten_lists(text: &str, hint: &str) -> String {
    let mut text = text.to_owned();
    for separator in ["; ", ", "] {
        let items = split_outside_brackets(&text, separator);
        if items.len() > LISTED + 1 {
            let more = items.len() - LISTED;
            let elided = format!("... ({more} more{hint})");
            let kept: Vec<&str> =
                items[..LISTED - 1].iter().copied().chain([elided.as_str()]).chain(items.last().copied()).collect();
            text = kept.join(separator);
        }
    }
    // Then the lists inside each outermost pair of brackets.
    let mut out = String::new();
    let mut depth = 0usize;
    let mut inner = String::new();
    for c in text.chars() {
        match c {
            '[' | '(' if depth == 0 => {
                depth = 1;
                out.push(c);
                continue;
            }
            '[' | '(' => depth += 1,
            ']' | ')' if depth == 1 => {
                depth = 0;
                out.push_str(&shorten_lists(&std::mem::take(&mut inner), hint));
                out.push(c);
                continue;
            }
            ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 { out.push(c) } else { inner.push(c) }
    }
    out.push_str(&inner);
    out
}

/// `text` split at each `separator` that is outside every pair of brackets.
fn split_outside_brackets<'t>(text: &'t str, separator: &str) -> Vec<&'t str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 && i >= start && text[i..].starts_with(separator) => {
                items.push(&text[start..i]);
                start = i + separator.len();
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_is_cut_short_and_brackets_keep_their_items_whole() {
        let rules: Vec<String> = (1..=9).map(|i| format!("r{i} (max_bytes {i}, layout one_pe)")).collect();
        let line = format!("no rule matches; its rules are {}", rules.join("; "));
        assert_eq!(
            shorten_lists(&line, ""),
            "no rule matches; its rules are r1 (max_bytes 1, layout one_pe); r2 (max_bytes 2, layout one_pe); \
             r3 (max_bytes 3, layout one_pe); r4 (max_bytes 4, layout one_pe); ... (4 more); \
             r9 (max_bytes 9, layout one_pe)"
        );
        let names: Vec<String> = (1..=8).map(|i| format!("a{i}")).collect();
        let line = format!("unknown `x`: expected one of [{}]: see --help", names.join(", "));
        assert_eq!(
            shorten_lists(&line, "; see kernbench list"),
            "unknown `x`: expected one of [a1, a2, a3, a4, a5, ... (2 more; see kernbench list), a8]: see --help"
        );
        let short = "unknown `x`: expected one of [a, b, c, d, e, f, g]";
        assert_eq!(shorten_lists(short, ""), short, "seven items are spelt out");
    }
}
