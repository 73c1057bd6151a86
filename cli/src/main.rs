//! The `kernbench` command line: parses arguments and hands them to the library.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use kernbench_cli::commands;

fn main() -> ExitCode {
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    kernbench::sim::keep_freed_memory();
    let mut out = std::io::stdout().lock();
    match commands::run(cli, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`kernbench list | head`) is not an error of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernbench: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// Help and version go to stdout as clap writes them; a usage error is one line on stderr, exit code 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Nothing useful is left to do if stdout is gone.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = commands::Cli::command().get_subcommands().map(|c| c.get_name().to_owned()).collect();
        eprintln!("kernbench: missing subcommand: expected one of {} (see kernbench --help)", names.join(", "));
        return ExitCode::from(2);
    }
    // clap's message, up to the usage block, on one line: `error: ... not provided:\n  <COLLECTIVE>`.
    let text = e.to_string();
    let message: Vec<&str> =
        text.lines().map(str::trim).take_while(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
    eprintln!("kernbench: {} (see kernbench --help)", message.join(" ").trim_start_matches("error: "));
    ExitCode::from(2)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// The error and its causes on one line, skipping a cause its parent's message already quotes.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(ToString::to_string) {
        if !line.contains(&cause) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&cause);
        }
    }
    line.replace('\n', " ")
}
