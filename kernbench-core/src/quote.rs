//! How errors quote what a user wrote (a name in a file or on the command line): cut short and with
//! control characters escaped, so that every message stays one short line. Uses nothing of the crate's.

use std::fmt;

/// The most characters of a user's name an error quotes; longer ones are cut to their start.
pub(crate) const MAX_QUOTED_CHARS: usize = 48;

/// A user's name as an error quotes it: its first [`MAX_QUOTED_CHARS`] characters with control
/// characters escaped (`a\nb` for a name holding a newline), then how many more there were.
pub(crate) struct Quoted<'a>(pub(crate) &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape_controls(self.0.chars().take(MAX_QUOTED_CHARS), f)?;
        let rest = self.0.chars().count().saturating_sub(MAX_QUOTED_CHARS);
        if rest > 0 {
            write!(f, "... ({rest} more characters)")?;
        }
        Ok(())
    }
}

fn escape_controls(chars: impl Iterator<Item = char>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for c in chars {
        if c.is_control() {
            write!(f, "{}", c.escape_debug())?;
        } else {
            fmt::Write::write_char(f, c)?;
        }
    }
    Ok(())
}

/// A message from the JSON decoder (which quotes an unknown field or variant in backticks as written,
/// however long and whatever it holds) with each quoted name as [`Quoted`] and no control characters.
pub(crate) fn decoder_message(message: &str) -> String {
    struct Escaped<'a>(&'a str);
    impl fmt::Display for Escaped<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            escape_controls(self.0.chars(), f)
        }
    }
    // The segments at odd indices are the quoted ones.
    message
        .split('`')
        .enumerate()
        .map(|(i, segment)| if i % 2 == 1 { Quoted(segment).to_string() } else { Escaped(segment).to_string() })
        .collect::<Vec<_>>()
        .join("`")
}
