//! Reading the files a user names (system specs, registries, logs): with a size bound, so that a path
//! such as `/dev/zero` ends in an error instead of filling memory. Uses nothing of the crate's.

use std::io::{self, Read};
use std::path::Path;

/// The largest spec or registry file read: far above any real one (the default registry is a few KiB).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The file's bytes, if there are at most [`MAX_FILE_BYTES`].
///
/// # Errors
/// What the operating system says, [`io::ErrorKind::InvalidData`] for a longer file.
pub fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {} MiB, the most a kernbench file may be", MAX_FILE_BYTES >> 20),
        ));
    }
    Ok(bytes)
}

/// The file's text, if it is at most [`MAX_FILE_BYTES`] of UTF-8.
///
/// # Errors
/// As [`read_bounded`], and [`io::ErrorKind::InvalidData`] for a file that is not UTF-8.
pub(crate) fn read_text(path: &Path) -> io::Result<String> {
    String::from_utf8(read_bounded(path)?).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("byte {} is not UTF-8 text", e.utf8_error().valid_up_to()))
    })
}
