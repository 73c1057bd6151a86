//! The lines `cargo bench --bench runtime` prints: one figure per line, beside its target and whether
//! it is met. The benchmark prints them, and the README test (`cli/tests/cli/readme.rs`) parses the
//! README's sample and formats each line again with [`figure`], so the sample cannot drift from what the
//! benchmark prints, nor mark a figure met that misses its target.

use std::fmt;

/// Width of the label column.
pub const LABEL: usize = 50;

/// What a figure is held to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// At most this much (a time, a memory size, a cost ratio).
    AtMost(f64),
    /// At least this much (a rate, a speed-up, a bandwidth ratio).
    AtLeast(f64),
    /// No target: a reference figure of the machine, or one shown for context.
    None,
}

impl Goal {
    /// `pass` or `miss`, or nothing without a target.
    pub fn mark(self, value: f64) -> &'static str {
        match self {
            Goal::AtMost(bound) if value <= bound => "pass",
            Goal::AtLeast(bound) if value >= bound => "pass",
            Goal::AtMost(_) | Goal::AtLeast(_) => "miss",
            Goal::None => "",
        }
    }

    /// Reads a goal back from its printed form (`<= 50`, `>= 0.8`, `-`).
    #[allow(dead_code, reason = "the README test reads the sample's goals back; the benchmark does not")]
    pub fn parse(text: &str) -> Option<Goal> {
        let text = text.trim();
        if text == "-" {
            return Some(Goal::None);
        }
        let (op, bound) = text.split_once(' ')?;
        let bound = bound.parse().ok()?;
        match op {
            "<=" => Some(Goal::AtMost(bound)),
            ">=" => Some(Goal::AtLeast(bound)),
            _ => None,
        }
    }
}

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Goal::AtMost(bound) => write!(f, "<= {bound}"),
            Goal::AtLeast(bound) => write!(f, ">= {bound}"),
            Goal::None => f.write_str("-"),
        }
    }
}

/// One figure: `label`, the value in `unit` (one word), its goal and mark, then `note` (how it was
/// measured, or the same figure as a multiple of a reference).
pub fn figure(label: &str, value: f64, unit: &str, goal: Goal, note: &str) -> String {
    let goal_text = goal.to_string();
    let shown = format!("{value:.3}");
    // Marked by the figure as shown, so that a reader (and the README test) comparing it with the
    // target comes to the same mark.
    let mark = goal.mark(shown.parse().unwrap_or(value));
    let line = format!("{label:<LABEL$} {shown:>9} {unit:<8} {goal_text:<9} {mark:<4}  {note}");
    line.trim_end().to_owned()
}

/// The header above the figures.
pub fn header() -> String {
    format!("{:<LABEL$} {:>9} {:<8} {:<9} {:<4}  {}", "figure", "measured", "unit", "target", "", "how")
}
