//! Output files written whole or not at all: checked before the work that fills them starts, then
//! written to a temporary file beside the target and renamed over it, so that a run that fails or is
//! killed leaves the target as it was.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use tempfile::NamedTempFile;

/// A file the command will write, known to be writable when the command started.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
}

impl OutputFile {
    /// Checks that `path` can be written: it is not a directory, and its directory exists and takes a
    /// new file (one is made there and removed again). The temporary file is not kept until
    /// [`OutputFile::write`]: a run killed during its long work would leave it behind.
    ///
    /// # Errors
    /// What stops the file from being written, naming the path.
    ///
    /// # Examples
    /// ```
    /// use kernbench_cli::files::OutputFile;
    /// let dir = std::env::temp_dir().join("kernbench-doc-output-file");
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let file = OutputFile::check(&dir.join("out.txt")).unwrap();
    /// file.write(b"whole\n").unwrap();
    /// assert_eq!(std::fs::read_to_string(dir.join("out.txt")).unwrap(), "whole\n");
    /// assert!(OutputFile::check(&dir.join("no/such/dir/out.txt")).is_err());
    /// assert!(OutputFile::check(&dir).is_err());
    /// ```
    pub fn check(path: &Path) -> Result<OutputFile> {
        if path.is_dir() {
            return Err(anyhow!("cannot write `{}`: it is a directory: expected a file name", path.display()));
        }
        OutputFile { path: path.to_owned() }.temporary().map(|_| OutputFile { path: path.to_owned() })
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to a temporary file beside the target, flushes it to disk, and renames it
    /// over the target, which therefore holds either its old contents or all of `contents`.
    ///
    /// # Errors
    /// What failed, naming the path; the target is then unchanged and the temporary file removed.
    pub fn write(&self, contents: &[u8]) -> Result<()> {
        let context = || format!("cannot write `{}`", self.path.display());
        let mut temporary = self.temporary()?;
        temporary.write_all(contents).with_context(context)?;
        temporary.as_file().sync_all().with_context(context)?;
        temporary.persist(&self.path).map_err(|e| e.error).with_context(context)?;
        Ok(())
    }

    /// A new temporary file in the target's directory, removed when dropped.
    fn temporary(&self) -> Result<NamedTempFile> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".kernbench-");
        // tempfile makes files only their owner may read; an output is made as any other file, with
        // the permissions the umask leaves.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        builder.tempfile_in(dir).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => format!("no directory `{}`", dir.display()),
                std::io::ErrorKind::PermissionDenied => format!("directory `{}` is not writable", dir.display()),
                _ => format!("cannot create a file in `{}`: {e}", dir.display()),
            };
            anyhow!("cannot write `{}`: {why}", self.path.display())
        })
    }
}
