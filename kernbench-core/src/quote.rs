//! How errors quote what a user wrote (a name in a file, an argument on the command line): cut short and with
//! control characters escaped, so that every message stays one short line. Uses nothing of the crate's.

use std::fmt;

/// The most characters of a user's name an error quotes; longer ones are cut to their start.
pub(crate) const MAX_QUOTED_CHARS: usize = 48;

/// Text a user gave (a name in a file, an argument) as an error quotes it: its first 48 characters
/// with control characters escaped, then how many more there were, so the error stays one short line.
///
/// # Examples
/// ```
/// use kernbench_core::Quoted;
/// assert_eq!(Quoted("ring").to_string(), "ring");
/// assert_eq!(Quoted("a\nb").to_string(), "a\\nb");
/// let long = "x".repeat(50);
/// assert_eq!(Quoted(&long).to_string(), format!("{}... (2 more characters)", "x".repeat(48)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a>(pub &'a str);

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

/// The most characters of a decoder's message kept whole: far above the usual ones (about 200, with
/// the expected fields and the line and column); only a message quoting pathological text is longer.
const MAX_DECODER_CHARS: usize = 300;

/// A message from the JSON decoder, which quotes what it did not expect as written, however long and
/// whatever it holds (an unknown field or variant in backticks, a string of the wrong type in double
/// quotes), made one short line: each backticked name as [`Quoted`], control characters escaped, and
/// a message still longer than 300 characters (a name holding backticks, a long string) cut in the
/// middle, keeping its start (what is wrong) and its end (where).
///
/// # Examples
/// ```
/// use kernbench_core::decoder_message;
/// let error = serde_json::from_str::<u32>(&format!("\"{}\"", "a".repeat(1000))).unwrap_err();
/// let line = decoder_message(&error.to_string());
/// assert!(line.len() < 400 && line.ends_with("line 1 column 1002"), "{line}");
/// ```
pub fn decoder_message(message: &str) -> String {
    struct Escaped<'a>(&'a str);
    impl fmt::Display for Escaped<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            escape_controls(self.0.chars(), f)
        }
    }
    // The segments at odd indices are the quoted ones.
    let line = message
        .split('`')
        .enumerate()
        .map(|(i, segment)| if i % 2 == 1 { Quoted(segment).to_string() } else { Escaped(segment).to_string() })
        .collect::<Vec<_>>()
        .join("`");
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= MAX_DECODER_CHARS {
        return line;
    }
    let (head, tail) = (MAX_DECODER_CHARS / 2, MAX_DECODER_CHARS / 4);
    let cut = chars.len() - head - tail;
    let head: String = chars[..head].iter().collect();
    let tail: String = chars[chars.len() - tail..].iter().collect();
    format!("{head}... ({cut} characters cut) ...{tail}")
}
