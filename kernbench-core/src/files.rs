//! Reading the JSON files a user names (system specs, registries): with a size bound, so that a path
//! such as `/dev/zero` ends in an error instead of filling memory. Uses nothing of the crate's.

use std::io::{self, Read};
use std::path::Path;

/// The largest spec or registry file read: far above any real one (the default registry is a few KiB).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The file's text, if it is at most [`MAX_FILE_BYTES`] of UTF-8.
///
/// # Errors
/// What the operating system says, [`io::ErrorKind::InvalidData`] for a longer file or one that is
/// not UTF-8.
pub(crate) fn read_text(path: &Path) -> io::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {} MiB, the most a kernbench file may be", MAX_FILE_BYTES >> 20),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("byte {} is not UTF-8 text", e.utf8_error().valid_up_to()))
    })
}

/// The longest name from a user's file an error quotes whole; longer ones are cut to their start.
pub(crate) const MAX_QUOTED_CHARS: usize = 48;

/// The decoder's message about a user's JSON, fit for one line: a quoted name (an unknown field or
/// variant, which serde quotes as written, however long) cut to [`MAX_QUOTED_CHARS`] characters and
/// control characters in it escaped, so that a key such as `"a\nb"` cannot break the line.
pub(crate) fn decoder_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let mut out = String::with_capacity(text.len().min(512));
    // serde quotes names in backticks: the segments at odd indices are the quoted ones.
    for (i, segment) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        let limit = if i % 2 == 1 { MAX_QUOTED_CHARS } else { usize::MAX };
        for c in segment.chars().take(limit) {
            if c.is_control() {
                out.extend(c.escape_debug());
            } else {
                out.push(c);
            }
        }
        let rest = segment.chars().count().saturating_sub(limit);
        if rest > 0 {
            out.push_str(&format!("... ({rest} more characters)"));
        }
    }
    out
}
