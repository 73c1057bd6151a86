//! Properties of reading nccl-tests logs: a real-looking log with lines deleted, repeated, moved or
//! inserted, words replaced, characters spliced in or the text cut short never panics, every error is
//! one short line, and every log read holds what a comparison needs.
//!
//! The edits are of lines and words, the units a log is read in; `mutate`'s are of JSON nodes.

use kernbench::System;
use kernbench::calibrate::NcclLog;
use proptest::prelude::*;
use proptest::sample::{Index, select};

use crate::mutate::one_line_within;

/// The longest error message a user should have to read on one line.
const MAX_MESSAGE: usize = 400;

/// The logs mutated: both forms of the device lines, with and without root and in-place columns, and a
/// table alone, whose ranks its bandwidths tell.
const LOGS: [(&str, &str); 3] = [
    ("h100x8-all_reduce.log", include_str!("../../fixtures/nccl-tests/h100x8-all_reduce.log")),
    ("a100x4-all_gather.log", include_str!("../../fixtures/nccl-tests/a100x4-all_gather.log")),
    ("h100x16-all_reduce.log", include_str!("../../fixtures/nccl-tests/h100x16-all_reduce-table-only.log")),
];

/// Words a log may hold where it should not: numbers at and past the limits, what C's printf writes for
/// infinities and NaN, the words the reader looks for, control characters and long text.
const WORDS: &[&str] = &[
    "",
    "0",
    "-1",
    "-0",
    "0.00",
    "1e400",
    "1e-400",
    "inf",
    "-inf",
    "nan",
    "-nan",
    "N/A",
    "18446744073709551615",
    "18446744073709551616",
    "#",
    "##",
    "## ",
    "#wrong",
    "Rank",
    "on",
    "device",
    "[0x1]",
    "size",
    "count",
    "root",
    "starting:",
    "all_gather_perf",
    "NCCL INFO",
    "a\u{7}b",
    "\u{0}",
    "é",
];

/// Whole lines a log may hold where it should not.
const LINES: &[&str] = &[
    "# Collective test starting: sendrecv_perf",
    "# Collective test starting: all_gather_perf",
    "# nThread 1 nGpus 1",
    "#  Rank  9 Group  0 Pid  1 on other device  0 [0x1] Another GPU",
    "#  Rank  x",
    "#       size         count      type   redop     time   algbw   busbw  #wrong",
    "1 2 3 4 5 6 7 8",
    "1024 256 float sum -1 0 0 0 0",
    "1024 256 float sum -1 1e400 inf nan N/A 1 1 1 1",
    "garbage after the table",
    "## a citation",
    "",
];

/// One change to a log's text.
#[derive(Clone, Debug)]
enum Edit {
    DeleteLine,
    RepeatLine,
    SwapWithNext,
    InsertLine(String),
    /// Replace one word of the line (whitespace-separated) with another.
    ReplaceWord(Index, String),
    DeleteWord(Index),
    /// Insert characters into the line.
    Splice(Index, String),
    /// End the text inside the line, as a log whose writer was killed.
    Cut(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let word = prop_oneof![
        4 => select(WORDS).prop_map(str::to_owned),
        1 => "[a-z0-9.#\\-]{1,3}".prop_map(|unit| unit.repeat(700)),
        1 => "\\PC{1,6}",
    ];
    prop_oneof![
        2 => Just(Edit::DeleteLine),
        1 => Just(Edit::RepeatLine),
        1 => Just(Edit::SwapWithNext),
        1 => select(LINES).prop_map(|line| Edit::InsertLine(line.to_owned())),
        4 => (any::<Index>(), word).prop_map(|(at, word)| Edit::ReplaceWord(at, word)),
        2 => any::<Index>().prop_map(Edit::DeleteWord),
        1 => (any::<Index>(), "\\PC{1,8}").prop_map(|(at, noise)| Edit::Splice(at, noise)),
        1 => any::<Index>().prop_map(Edit::Cut),
    ]
}

/// `line` with one word replaced by `with` (`None`: deleted); the spacing of the others kept.
fn with_word(line: &str, at: Index, with: Option<&str>) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.is_empty() {
        return with.unwrap_or_default().to_owned();
    }
    let at = at.index(words.len());
    let kept = words.iter().enumerate().filter_map(|(i, word)| if i == at { with } else { Some(*word) });
    kept.collect::<Vec<_>>().join("  ")
}

/// `line` with `noise` put in before the character `at` picks (or at its end).
fn spliced(line: &str, at: Index, noise: &str) -> String {
    let mut chars: Vec<char> = line.chars().collect();
    let at = at.index(chars.len() + 1);
    chars.splice(at..at, noise.chars());
    chars.into_iter().collect()
}

/// A log from [`LOGS`] with one to four edits, and the log's name.
fn mutated() -> impl Strategy<Value = (&'static str, String)> {
    let edits = proptest::collection::vec((any::<Index>(), edit()), 1..=4);
    (select(&LOGS[..]), edits).prop_map(|((name, text), edits)| {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for (at, edit) in edits {
            let i = at.index(lines.len().max(1));
            match edit {
                Edit::DeleteLine if i < lines.len() => drop(lines.remove(i)),
                Edit::RepeatLine if i < lines.len() => lines.insert(i, lines[i].clone()),
                Edit::SwapWithNext if i + 1 < lines.len() => lines.swap(i, i + 1),
                Edit::InsertLine(line) => lines.insert(i.min(lines.len()), line),
                Edit::ReplaceWord(word, with) if i < lines.len() => lines[i] = with_word(&lines[i], word, Some(&with)),
                Edit::DeleteWord(word) if i < lines.len() => lines[i] = with_word(&lines[i], word, None),
                Edit::Splice(at, noise) if i < lines.len() => lines[i] = spliced(&lines[i], at, &noise),
                Edit::Cut(at) if i < lines.len() => {
                    lines.truncate(i + 1);
                    lines[i] = lines[i].chars().take(at.index(lines[i].chars().count() + 1)).collect();
                }
                _ => {}
            }
        }
        (name, lines.join("\n"))
    })
}

/// What every log read must hold for a comparison, and every error must be: one short line.
fn read_or_one_line(name: &str, text: &str) -> Result<(), TestCaseError> {
    match NcclLog::parse(name, text, None) {
        Ok(log) => {
            prop_assert!(!log.rows.is_empty() && log.ranks > 0 && log.nodes != Some(0), "{:?}", log);
            for row in &log.rows {
                let times = std::iter::once(row.out_of_place).chain(row.in_place).map(|m| m.time_us);
                prop_assert!(times.clone().all(|t| t.is_finite() && t > 0.0), "{:?}", row);
            }
            prop_assert!(log.sizes().iter().all(|&size| size > 0 && log.at_size(size).is_some()));
            let misfit = System::shape(log.ranks % 64 + 1, 1, 1, 1).unwrap();
            if let Err(e) = log.check_fits(&misfit) {
                one_line_within(&e.to_string(), MAX_MESSAGE)?;
            }
        }
        Err(e) => one_line_within(&e.to_string(), MAX_MESSAGE)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn a_mutated_log_is_read_or_fails_in_one_short_line((name, text) in mutated()) {
        read_or_one_line(name, &text)?;
    }

    #[test]
    fn any_text_is_read_or_fails_in_one_short_line(text in "(\\PC{0,40}\n){0,20}") {
        read_or_one_line("any.log", &text)?;
    }
}

#[test]
fn the_logs_mutated_are_read_as_they_are() {
    for (name, text) in LOGS {
        let log = NcclLog::parse(name, text, None).unwrap();
        assert!(log.rows.len() >= 3, "{name}");
    }
}
