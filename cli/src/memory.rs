//! Memory: what the machine has free and what the process has held so far, so that a run that
//! cannot fit is refused before it allocates. What a call will hold at its peak is the library's
//! estimate, [`kernbench::estimate::peak_memory`], where its measurements are.

/// The memory the system can still give this process without swapping, in bytes: `MemAvailable` of
/// `/proc/meminfo` on Linux; `None` where it is not known (other systems, or an unreadable file), which
/// means no limit.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The most memory this process has held at once so far (its peak resident set), in bytes; `None`
/// where the system does not say.
pub fn peak_resident() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a whole rusage into the pointer it is given, which is valid for it.
        let usage = unsafe {
            if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
                return None;
            }
            usage.assume_init()
        };
        // Linux counts ru_maxrss in KiB, macOS in bytes.
        let scale = if cfg!(target_os = "macos") { 1 } else { 1024 };
        u64::try_from(usage.ru_maxrss).ok()?.checked_mul(scale)
    }
    #[cfg(not(unix))]
    {
        None
    }
}
