//! MSCCL-IR XML in and out.

use std::path::Path;

use crate::program::Program;

/// Reads an MSCCL-IR XML file.
///
/// # Errors
/// Not yet.
pub fn from_file(path: &Path) -> Result<Program, String> {
    Err(format!("{}: reading MSCCL-IR is not built yet", path.display()))
}
