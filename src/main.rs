//! The `kernbench` command line: parses arguments and hands them to the library.

mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
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
