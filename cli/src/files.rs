//! Output files written whole or not at all: checked before the work that fills them starts, then
//! written to a temporary file beside the target and renamed over it, so that a run that fails or is
//! killed leaves the target as it was. A target that is not a regular file (`/dev/null`, a pipe) is
//! written in place: renaming over it would replace it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use tempfile::NamedTempFile;

/// A file the command will write, known to be writable when the command started.
#[derive(Debug)]
pub struct OutputFile {
    /// As the user named it, for messages.
    path: PathBuf,
    /// Where a symbolic link leads, so that writing replaces the file and keeps the link.
    target: PathBuf,
    /// Whether the target exists and is not a regular file.
    in_place: bool,
}

impl OutputFile {
    /// Checks that `path` can be written: it is not a directory, and its directory exists and takes a
    /// new file (one is made there and removed again), unless it exists and is not a regular file. The temporary file is not kept until
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
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let in_place = std::fs::metadata(&target).is_ok_and(|m| !m.file_type().is_file());
        let file = OutputFile { path: path.to_owned(), target, in_place };
        // Opening a pipe to check it would hand its reader an empty stream; one that exists will do.
        if !in_place {
            file.temporary()?;
        }
        Ok(file)
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
        if self.in_place {
            return std::fs::write(&self.target, contents).with_context(context);
        }
        let mut temporary = self.temporary()?;
        temporary.write_all(contents).with_context(context)?;
        temporary.as_file().sync_all().with_context(context)?;
        temporary.persist(&self.target).map_err(|e| e.error).with_context(context)?;
        Ok(())
    }

    /// A new temporary file in the target's directory, removed when dropped.
    fn temporary(&self) -> Result<NamedTempFile> {
        let dir = match self.target.parent() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_fails_leaves_the_target_and_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("kernbench-failed-write-{}", std::process::id()));
        let target = dir.join("out.json");
        std::fs::create_dir_all(&dir).unwrap();
        let file = OutputFile::check(&target).unwrap();
        // After the check, the target becomes a directory with a file in it: the rename must fail.
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("kept"), "kept\n").unwrap();
        let error = file.write(b"new contents\n").unwrap_err();
        assert!(error.to_string().starts_with(&format!("cannot write `{}`", target.display())), "{error}");
        assert_eq!(std::fs::read_to_string(target.join("kept")).unwrap(), "kept\n");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["out.json"], "a temporary file was left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
