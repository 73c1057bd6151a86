//! Memory: what a call will hold at its peak, what the machine has free, and what the process has
//! held so far, so that a run that cannot fit is refused before it allocates.
//!
//! The estimate counts what a call keeps alive at once (measured with `/usr/bin/time -v` on release
//! builds of `kernbench run COLLECTIVE --bytes SIZE`, 4 SIPs of the built-in system, f32, allocator set up by
//! `kernbench::sim::keep_freed_memory`):
//!
//! ```text
//! collective       size  inputs I  outputs O  reference R  peak RSS   peak - (I + O + R)
//! all_reduce       512M  2048M     2048M      512M         5188M      0.28 I
//! all_reduce       128M   512M      512M      128M         1300M      0.29 I
//! all_gather        64M    64M      256M       64M          725M      1.33 O
//! broadcast         64M   256M      256M        0M          836M      1.27 O
//! all_to_all        64M   256M      256M       64M          901M      1.27 O
//! reduce_scatter    64M   256M       64M       64M          548M      0.64 I
//! reduce            64M   256M       64M       64M          452M      0.27 I
//! ```
//!
//! `I` is every rank's input, `O` every rank's output (for reduce, only the root's is new), `R` the postcondition's reference (one reduced
//! rank for the reductions, the gathered tensor once for all-gather, one rank's blocks at a time for
//! all-to-all, nothing for broadcast, whose reference shares the root's input). The rest is messages in
//! flight, the kernels' working copies and the allocator's slack: at most 3/4 of `I` for the reducing
//! collectives and 3/2 of `O` for the ones that forward data, plus a fixed 64 MiB (a tiny run peaks at
//! 5 MB). The estimate is an upper bound on these measurements, not a prediction of each one.

use kernbench::Collective;

/// The fixed part of a run's peak: the process, its threads and the plan, with room to spare.
const FIXED_BYTES: u64 = 64 << 20;

/// The estimated peak memory, in bytes, of one call of `collective` over `ranks` ranks that each
/// hold `input_bytes` bytes of input (see the [module docs](self) for the measurements behind it).
/// Saturates at `u64::MAX` rather than overflow.
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench_cli::memory::estimate_peak;
/// // 4 ranks of 512 MiB: 2 GiB in, 2 GiB out, 512 MiB of reference, 1.5 GiB in flight, 64 MiB.
/// assert_eq!(estimate_peak(Collective::AllReduce, 4, 512 << 20), (6 << 30) + (64 << 20));
/// ```
pub fn estimate_peak(collective: Collective, ranks: usize, input_bytes: u64) -> u64 {
    let n = ranks.max(1) as u64;
    let inputs = input_bytes.saturating_mul(n);
    let (outputs, reference) = match collective {
        Collective::AllReduce => (inputs, input_bytes),
        // Only the root writes its output; the others keep sharing their input's buffer.
        Collective::Reduce | Collective::ReduceScatter => (input_bytes, input_bytes),
        Collective::AllGather => (inputs.saturating_mul(n), inputs),
        Collective::Broadcast => (inputs, 0),
        Collective::AllToAll => (inputs, input_bytes),
    };
    let in_flight = match collective {
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => (inputs / 4).saturating_mul(3),
        Collective::AllGather | Collective::Broadcast | Collective::AllToAll => (outputs / 2).saturating_mul(3),
    };
    [inputs, outputs, reference, in_flight, FIXED_BYTES].into_iter().fold(0, u64::saturating_add)
}

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

/// `bytes` for people: in GiB, MiB or KiB with two decimals, or in bytes below 1 KiB.
///
/// # Examples
/// ```
/// use kernbench_cli::memory::human;
/// assert_eq!(human(3 << 29), "1.50 GiB");
/// assert_eq!(human(512), "512 B");
/// ```
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match UNITS.iter().find(|&&(size, _)| bytes >= size) {
        Some(&(size, unit)) => format!("{:.2} {unit}", bytes as f64 / size as f64),
        None => format!("{bytes} B"),
    }
}
