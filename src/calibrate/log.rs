//! nccl-tests output read into rows: which collective ran on which GPUs (the header), its sizes and
//! times (the table), and the `## ` lines that cite where the log came from.
//!
//! Uses `kernbench_core`'s collectives, systems and quoting only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kernbench_core::{Collective, Quoted, System};

/// How far apart a row's out-of-place and in-place times may be, as a fraction of the smaller, before
/// the row is [noisy](LogRow::noisy): the two run the same call on the same machine, so a wider gap
/// says the machine was disturbed while it measured.
pub const NOISE_LIMIT: f64 = 0.2;

/// The nccl-tests programs of the collectives kernbench simulates, as `# Collective test starting:`
/// names them.
const PROGRAMS: [(&str, Collective); 7] = [
    ("all_reduce_perf", Collective::AllReduce),
    ("all_gather_perf", Collective::AllGather),
    ("reduce_scatter_perf", Collective::ReduceScatter),
    ("broadcast_perf", Collective::Broadcast),
    ("reduce_perf", Collective::Reduce),
    ("alltoall_perf", Collective::AllToAll),
    ("sendrecv_perf", Collective::SendRecv),
];

/// A device line, a rank's: older versions have no `Group`.
const DEVICE_LINE: &str = "`#  Rank  0 Group  0 Pid  1234 on HOST device  0 [BUSID] GPU`";

/// The columns of a row, `redop`, `root` and the in-place ones only in the versions and runs that
/// print them.
const COLUMNS: &str = "size count type [redop] [root] time algbw busbw #wrong [time algbw busbw #wrong]";

/// The most ranks a log's bandwidths are searched for when it has no device lines.
const MAX_RANKS: usize = 4096;

/// A run of nccl-tests, as its log tells it: the collective, the GPUs that ran it and the time of each
/// size.
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench::calibrate::NcclLog;
/// let text = "\
/// ### source: https://example.org/run
/// ## Collective test starting: all_reduce_perf
/// ##  Rank  0 Group  0 Pid  7 on a device  0 [0x18] NVIDIA H100 80GB HBM3
/// ##  Rank  1 Group  0 Pid  7 on a device  1 [0x2a] NVIDIA H100 80GB HBM3
///         1024           256     float     sum      -1    20.00    0.05    0.05      0    21.00    0.05    0.05      0
/// ";
/// let log = NcclLog::parse("h100.log", text, None).unwrap();
/// assert_eq!((log.collective, log.ranks, log.nodes), (Collective::AllReduce, 2, Some(1)));
/// assert_eq!(log.citation, ["source: https://example.org/run"]);
/// assert_eq!(log.at_size(1024).unwrap().time_ns(), 20_000.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NcclLog {
    /// What the log is called in messages: the path it was read from.
    pub name: String,
    /// The log's `## ` lines, without the `## `: where it came from.
    pub citation: Vec<String>,
    /// The collective it measured.
    pub collective: Collective,
    /// Its ranks, one a GPU (a SIP, to kernbench).
    pub ranks: usize,
    /// The hosts its ranks ran on; `None` when the log has no device lines (its ranks are then
    /// counted from its bandwidths).
    pub nodes: Option<usize>,
    /// The names of its GPUs, each once, in the order of their ranks (none without device lines).
    pub gpus: Vec<String>,
    /// How many GPUs one host thread drove, from its header (`# nThread 1 nGpus 8`: nccl-tests' `-g`);
    /// `None` when the log has no header.
    pub gpus_per_thread: Option<usize>,
    /// The table, in the log's order.
    pub rows: Vec<LogRow>,
}

/// One size of a log's table.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRow {
    /// The line of the log it is on, from 1.
    pub line: usize,
    /// nccl-tests' size in bytes, as kernbench's `size` counts it (an all-gather's gathered output).
    pub size: u64,
    /// nccl-tests' count of elements (an all-gather's per rank, unlike kernbench's).
    pub count: u64,
    /// The element type, as nccl-tests names it (`float`, `half`, ...).
    pub dtype: String,
    /// The reduction, as nccl-tests names it (`sum`, or `none` where nothing is reduced or the table
    /// has no `redop` column).
    pub op: String,
    /// The out-of-place call: separate input and output buffers, as kernbench's calls have.
    pub out_of_place: Measured,
    /// The in-place call, when the log has it.
    pub in_place: Option<Measured>,
}

/// What nccl-tests measured of one call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The call's time, us.
    pub time_us: f64,
    /// `size / time`, GB/s.
    pub algbw_gbps: f64,
    /// `algbw` times nccl-tests' factor for the collective, GB/s.
    pub busbw_gbps: f64,
}

/// Why a log cannot be read, or does not fit. Each message is one line, naming the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The file cannot be read: the operating system's reason, or that it is too large.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The path given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line that is not what its place in the log needs.
    #[error("{name}:{line}: expected {expected}, got {got}")]
    Line {
        /// The log.
        name: String,
        /// The line, from 1.
        line: usize,
        /// What would be valid there.
        expected: String,
        /// What the line holds.
        got: String,
    },
    /// Nothing in the log is a row of nccl-tests' table.
    #[error("{name}: no rows of results: expected nccl-tests' table ({COLUMNS})")]
    NoRows {
        /// The log.
        name: String,
    },
    /// The log does not list its ranks, nor do its bandwidths tell them, so it cannot be matched to a
    /// system.
    #[error(
        "{name}: how many ranks? expected nccl-tests' device lines before the table ({DEVICE_LINE}); without \
         them, busbw / algbw tells the ranks of every collective but broadcast and reduce, yet not here"
    )]
    NoRanks {
        /// The log.
        name: String,
    },
    /// The log measured a program whose collective kernbench does not simulate.
    #[error(
        "{name}: `{}` is not a collective kernbench simulates: expected one of all_reduce_perf, all_gather_perf, \
         reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf, sendrecv_perf",
        Quoted(program)
    )]
    UnknownCollective {
        /// The log.
        name: String,
        /// The program its header names.
        program: String,
    },
    /// Neither the log nor its name says which collective it measured, and the caller did not either.
    #[error(
        "{name}: which collective? it has no `# Collective test starting:` line and its name holds none (or \
         several) of all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv: name the \
         collective"
    )]
    UnnamedCollective {
        /// The log.
        name: String,
    },
    /// The log measured another collective than the caller's.
    #[error("{name} measured {found} (as {from} says), not {expected}")]
    OtherCollective {
        /// The log.
        name: String,
        /// The collective the log measured.
        found: Collective,
        /// What says so: its header or its name.
        from: &'static str,
        /// The caller's collective.
        expected: Collective,
    },
    /// The log's hosts are not the system's nodes.
    #[error(
        "{name} has {hardware}; the system has {system_nodes} node(s): give a system of {nodes} nodes (`nodes` in its spec, --system)"
    )]
    NodeMisfit {
        /// The log.
        name: String,
        /// Its ranks, nodes and GPUs ([`NcclLog::hardware`]).
        hardware: String,
        /// Its hosts.
        nodes: usize,
        /// The system's nodes.
        system_nodes: usize,
    },
    /// The log's ranks are not the system's SIPs.
    #[error("{name} has {hardware}; the system has {sips} SIPs: give a system of {ranks} SIPs (--system)")]
    Misfit {
        /// The log.
        name: String,
        /// Its ranks, nodes and GPUs ([`NcclLog::hardware`]).
        hardware: String,
        /// Its ranks.
        ranks: usize,
        /// The system's SIPs.
        sips: usize,
    },
}

impl NcclLog {
    /// Reads the log at `path`, as [`NcclLog::parse`] with the path as its name.
    ///
    /// # Errors
    /// [`LogError::Read`] when the file cannot be read or is larger than
    /// [`kernbench_core::MAX_FILE_BYTES`]; then as [`NcclLog::parse`].
    ///
    /// # Examples
    /// ```
    /// use kernbench::calibrate::{LogError, NcclLog};
    /// let missing = NcclLog::read(std::path::Path::new("no/such.log"), None).unwrap_err();
    /// assert!(matches!(missing, LogError::Read { .. }));
    /// assert!(missing.to_string().starts_with("cannot read no/such.log: "), "{missing}");
    /// ```
    pub fn read(path: &Path, collective: Option<Collective>) -> Result<NcclLog, LogError> {
        let failed = |source| LogError::Read { path: path.to_owned(), source };
        let bytes = kernbench_core::read_bounded(path).map_err(failed)?;
        // Logs carry whatever the launcher printed around the table; a stray byte there is no reason to refuse.
        NcclLog::parse(&path.display().to_string(), &String::from_utf8_lossy(&bytes), collective)
    }

    /// Reads `text`, the output of an nccl-tests program (`all_reduce_perf` and its siblings, any
    /// version), called `name` in messages.
    ///
    /// - Ranks, nodes and GPUs come from the device lines (`#  Rank  0 Group  0 Pid  1234 on HOST device
    ///   0 [BUSID] GPU`; older versions have no `Group`), one a rank whether one process runs every GPU
    ///   (`-g 8`) or each has its own (`mpirun -np 8 ... -g 1`). Some logs were published without them:
    ///   their ranks are the one count that every row's `busbw = algbw x factor(ranks)` allows, and their
    ///   nodes and GPUs are unknown.
    /// - The collective is the one `# Collective test starting: PROGRAM` names; in older logs, which have
    ///   no such line, the one `name`'s file name holds (`all_reduce`, `all_gather`, `reduce_scatter`,
    ///   `broadcast`, `reduce`, `alltoall` or `all_to_all`, `sendrecv`, with or without the underscores); else
    ///   `collective`. When the log or its name says, `collective` must agree.
    /// - A row is `size count type [redop] [root] time algbw busbw #wrong`, out of place, then the same
    ///   four in place when the log has them: the columns its titles name (with or without their `#`;
    ///   `error` for `#wrong` in older versions), or, without titles, those of the version that prints
    ///   rows that wide. `#wrong` may be a count, an error or `N/A`, bandwidths `inf` or `nan`; times
    ///   must be above 0. Once the table has started (its titles, or a first row), a line that begins
    ///   with a number must be such a row; before, one that is not is skipped.
    /// - Lines beginning `## ` are the log's citation, wherever they are; other `#` lines, blank lines
    ///   and NCCL's own messages (`NCCL INFO`, `NCCL WARN`, `NCCL version`) are skipped. Any other line
    ///   after a row ends the table, as does the header of a next test (`# nThread`, `# Collective test
    ///   starting:`); the rest of the text is read only for citations.
    ///
    /// # Errors
    /// [`LogError::Line`] for a row or a device line that cannot be read, [`LogError::NoRows`],
    /// [`LogError::NoRanks`], [`LogError::UnknownCollective`] for a program of another collective,
    /// [`LogError::UnnamedCollective`] and [`LogError::OtherCollective`].
    ///
    /// # Examples
    /// ```
    /// use kernbench::Collective;
    /// use kernbench::calibrate::NcclLog;
    /// // An older log: no collective line, no root column; two processes on two hosts.
    /// let text = "\
    /// ##   Rank  0 Pid  11 on a device  0 [0x18] Tesla V100-SXM2-32GB
    /// ##   Rank  1 Pid  12 on b device  0 [0x18] Tesla V100-SXM2-32GB
    /// ##       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
    ///         4096          1024   float    none    30.00    0.14    0.07  0e+00    40.00    0.10    0.05  0e+00
    /// ## Avg bus bandwidth    : 0.07
    /// ";
    /// let log = NcclLog::parse("v100-all_gather.log", text, None).unwrap();
    /// assert_eq!((log.collective, log.ranks, log.nodes), (Collective::AllGather, 2, Some(2)));
    /// assert!(log.rows[0].noisy(), "40 us is more than 20% above 30");
    /// let unnamed = NcclLog::parse("v100.log", text, None).unwrap_err();
    /// assert!(unnamed.to_string().contains("which collective?"), "{unnamed}");
    /// let cut = NcclLog::parse("v100-all_gather.log", &text.replace("0e+00    40.00", "0e+00"), None);
    /// assert_eq!(
    ///     cut.unwrap_err().to_string(),
    ///     "v100-all_gather.log:4: expected a row of 12 columns, as the table's titles (size count type redop \
    ///      time algbw busbw error time algbw busbw error), got 11"
    /// );
    /// ```
    pub fn parse(name: &str, text: &str, collective: Option<Collective>) -> Result<NcclLog, LogError> {
        let mut reader = Reader::new(name);
        for (index, line) in text.lines().enumerate() {
            reader.line(index + 1, line.trim())?;
        }
        reader.finish(collective)
    }

    /// The log's first row of `size` bytes, if it has one. Rows are matched on size, never on count,
    /// which nccl-tests gives per rank for all-gather; a log of several types or reductions (`-d all`)
    /// matches its first row of each size.
    pub fn at_size(&self, size: u64) -> Option<&LogRow> {
        self.rows.iter().find(|row| row.size == size)
    }

    /// The sizes a simulation can be set beside: the rows' sizes, each once, in the log's order, but 0
    /// (a call that moves nothing).
    ///
    /// # Examples
    /// ```
    /// use kernbench::calibrate::NcclLog;
    /// let text = "\
    /// ##  Rank  0 Group  0 Pid  7 on a device  0 [0x18] GPU
    /// 0 0 float none -1 5.0 0 0 0
    /// 8 0 float none -1 5.0 0 0 0
    /// 8 0 float none -1 5.2 0 0 0
    /// 16 4 float none -1 5.1 0 0 0
    /// ";
    /// let log = NcclLog::parse("all_gather.log", text, None).unwrap();
    /// assert_eq!(log.sizes(), [8, 16]);
    /// assert_eq!(log.at_size(8).unwrap().out_of_place.time_us, 5.0, "the first row of the size");
    /// ```
    pub fn sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> = Vec::new();
        for row in self.rows.iter().filter(|row| row.size > 0) {
            if !sizes.contains(&row.size) {
                sizes.push(row.size);
            }
        }
        sizes
    }

    /// What ran the log, for messages: `16 ranks on 2 nodes (NVIDIA H100 80GB HBM3)`, or `16 ranks
    /// (by busbw / algbw: no device lines)`.
    pub fn hardware(&self) -> String {
        /// The most GPU names spelled out: a log of many kinds is a mistake worth a short line.
        const NAMED: usize = 2;
        let plural = |n: usize, word: &str| if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") };
        let mut gpus: Vec<String> = self.gpus.iter().take(NAMED).map(|gpu| Quoted(gpu).to_string()).collect();
        if self.gpus.len() > NAMED {
            gpus.push(format!("{} more", self.gpus.len() - NAMED));
        }
        let gpus = if gpus.is_empty() { String::new() } else { format!(" ({})", gpus.join(", ")) };
        match self.nodes {
            Some(nodes) => format!("{} on {}{gpus}", plural(self.ranks, "rank"), plural(nodes, "node")),
            None => format!("{} (by busbw / algbw: no device lines)", plural(self.ranks, "rank")),
        }
    }

    /// Checks that the log can be set beside simulations on `system`: its ranks (GPUs) are the system's
    /// SIPs, and its hosts, where its device lines name them, the system's nodes.
    ///
    /// # Errors
    /// [`LogError::Misfit`], saying how many SIPs the system needs; [`LogError::NodeMisfit`], how many
    /// nodes.
    ///
    /// # Examples
    /// ```
    /// use kernbench::System;
    /// use kernbench::calibrate::NcclLog;
    /// let rank = |r| format!("#  Rank {r:2} Group  0 Pid  7 on a device {r:2} [0x18] NVIDIA H100 80GB HBM3\n");
    /// let text: String = (0..8).map(rank).collect::<String>() + "1024 256 float sum -1 20.0 0.05 0.09 0\n";
    /// let log = NcclLog::parse("h100x8-all_reduce.log", &text, None).unwrap();
    /// assert!(log.check_fits(&System::shape(8, 1, 1, 1).unwrap()).is_ok());
    /// let misfit = log.check_fits(&System::shape(4, 1, 1, 1).unwrap()).unwrap_err();
    /// assert_eq!(
    ///     misfit.to_string(),
    ///     "h100x8-all_reduce.log has 8 ranks on 1 node (NVIDIA H100 80GB HBM3); the system has 4 SIPs: \
    ///      give a system of 8 SIPs (--system)"
    /// );
    /// // Two hosts of 4 GPUs: a system of one node does not fit.
    /// let host = |r| format!("#  Rank {r:2} Group  0 Pid  7 on host{} device {} [0x18] H100\n", r / 4, r % 4);
    /// let text: String = (0..8).map(host).collect::<String>() + "1024 256 float sum -1 20.0 0.05 0.09 0\n";
    /// let log = NcclLog::parse("h100x8-all_reduce.log", &text, None).unwrap();
    /// let misfit = log.check_fits(&System::shape(8, 1, 1, 1).unwrap()).unwrap_err();
    /// assert!(misfit.to_string().contains("the system has 1 node(s): give a system of 2 nodes"), "{misfit}");
    /// ```
    pub fn check_fits(&self, system: &System) -> Result<(), LogError> {
        let (name, hardware) = (self.name.clone(), self.hardware());
        if self.ranks != system.sips() {
            return Err(LogError::Misfit { name, hardware, ranks: self.ranks, sips: system.sips() });
        }
        match self.nodes {
            Some(nodes) if nodes != system.nodes() => {
                Err(LogError::NodeMisfit { name, hardware, nodes, system_nodes: system.nodes() })
            }
            _ => Ok(()),
        }
    }
}

impl LogRow {
    /// Whether the row's out-of-place and in-place times differ by more than [`NOISE_LIMIT`] of the
    /// smaller: a noisy row is shown but neither fitted nor judged. A row without in-place times is
    /// not noisy.
    ///
    /// # Examples
    /// ```
    /// use kernbench::calibrate::{LogRow, Measured};
    /// let time = |time_us| Measured { time_us, algbw_gbps: 1.0, busbw_gbps: 1.0 };
    /// let row = |in_place| LogRow {
    ///     line: 1, size: 1024, count: 256, dtype: "float".into(), op: "sum".into(),
    ///     out_of_place: time(100.0), in_place,
    /// };
    /// assert!(!row(Some(time(120.0))).noisy());
    /// assert!(row(Some(time(120.1))).noisy());
    /// assert!(row(Some(time(83.0))).noisy(), "100 is more than 20% above 83");
    /// assert!(!row(None).noisy());
    /// ```
    pub fn noisy(&self) -> bool {
        self.in_place.is_some_and(|in_place| {
            let (out, at) = (self.out_of_place.time_us, in_place.time_us);
            (out - at).abs() > NOISE_LIMIT * out.min(at)
        })
    }

    /// The out-of-place time in ns, the unit of kernbench's simulated times.
    pub fn time_ns(&self) -> f64 {
        self.out_of_place.time_us * 1e3
    }
}

/// What a log's header, device lines and table have said so far.
struct Reader {
    name: String,
    citation: Vec<String>,
    /// The program `# Collective test starting:` names.
    program: Option<String>,
    ranks: BTreeSet<u64>,
    hosts: BTreeSet<String>,
    gpus: Vec<String>,
    /// `nGpus` of the `# nThread` header.
    gpus_per_thread: Option<usize>,
    /// The table's columns, as its titles name them, when the log prints them.
    titled: Option<Layout>,
    rows: Vec<LogRow>,
    /// Whether a line after the rows ended the table.
    ended: bool,
}

impl Reader {
    fn new(name: &str) -> Reader {
        // A name is quoted whole in every message, so a control character in it must not break the line.
        let name = name.chars().map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.to_string() });
        Reader {
            name: name.collect(),
            citation: Vec::new(),
            program: None,
            ranks: BTreeSet::new(),
            hosts: BTreeSet::new(),
            gpus: Vec::new(),
            gpus_per_thread: None,
            titled: None,
            rows: Vec::new(),
            ended: false,
        }
    }

    /// Reads line `number` (trimmed).
    fn line(&mut self, number: usize, line: &str) -> Result<(), LogError> {
        if let Some(citation) = line.strip_prefix("## ") {
            self.citation.push(citation.trim().to_owned());
            return Ok(());
        }
        if self.ended || line.is_empty() || is_nccl_message(line) {
            return Ok(());
        }
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.split_whitespace().collect();
            return self.comment(number, &words);
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if self.rows.is_empty() && self.titles(&words) {
            return Ok(());
        }
        if words.first().is_none_or(|first| first.parse::<u64>().is_err()) {
            // Launcher output before the table; after its rows, whatever follows it.
            self.ended = !self.rows.is_empty();
            return Ok(());
        }
        match self.row(number, &words) {
            Ok(row) => self.rows.push(row),
            Err(e) if self.titled.is_some() || !self.rows.is_empty() => return Err(e),
            // Before the table, a launcher's line may begin with a number too.
            Err(_) => {}
        }
        Ok(())
    }

    /// Reads a `#` line: the collective, a device, the column titles; after the rows, the next test's
    /// header ends the table.
    fn comment(&mut self, number: usize, words: &[&str]) -> Result<(), LogError> {
        let program = match words {
            ["Collective", "test", "starting:", program, ..] => Some(*program),
            _ => None,
        };
        if !self.rows.is_empty() {
            self.ended = program.is_some() || words.first() == Some(&"nThread");
            return Ok(());
        }
        if self.program.is_none() {
            self.program = program.map(str::to_owned);
        }
        if let ["nThread", _, "nGpus", gpus, ..] = words {
            self.gpus_per_thread = gpus.parse().ok().filter(|&g| g > 0);
        }
        if words.first() == Some(&"Rank") {
            self.device(number, words)?;
        } else {
            self.titles(words);
        }
        Ok(())
    }

    /// Takes `words` as the table's column titles if they are; whether they were. Some logs have lost
    /// the titles' `#` on their way to where they were published.
    fn titles(&mut self, words: &[&str]) -> bool {
        let layout = Layout::of_titles(words);
        self.titled = layout.or(self.titled);
        layout.is_some()
    }

    /// Reads a device line: `Rank 0 [Group 0] Pid 1234 on HOST device 0 [BUSID] GPU NAME`.
    fn device(&mut self, number: usize, words: &[&str]) -> Result<(), LogError> {
        let parsed = || {
            let rank: u64 = words.get(1)?.parse().ok()?;
            let on = words.iter().position(|word| *word == "on")?;
            let host = words.get(on + 1)?;
            words.get(on + 2).filter(|word| **word == "device")?;
            words.get(on + 3)?.parse::<u64>().ok()?;
            words.get(on + 4).filter(|bus| bus.starts_with('[') && bus.ends_with(']'))?;
            Some((rank, (*host).to_owned(), words.get(on + 5..)?.join(" ")))
        };
        let Some((rank, host, gpu)) = parsed() else {
            let expected = format!("a device line ({DEVICE_LINE})");
            return Err(self.error(number, &expected, format!("`{}`", Quoted(&format!("# {}", words.join(" "))))));
        };
        self.ranks.insert(rank);
        self.hosts.insert(host);
        if !gpu.is_empty() && !self.gpus.contains(&gpu) {
            self.gpus.push(gpu);
        }
        Ok(())
    }

    /// Reads a row of the table: the columns its titles name, or those of a version that prints rows
    /// that wide.
    fn row(&self, number: usize, words: &[&str]) -> Result<LogRow, LogError> {
        let layout = match self.titled {
            Some(titled) => Some(titled).filter(|titled| titled.width() == words.len()),
            None => Layout::of_width(words.len()),
        };
        let Some(layout) = layout else {
            let expected = match self.titled {
                Some(titled) => {
                    format!(
                        "a row of {} columns, as the table's titles ({})",
                        titled.width(),
                        titled.titles().join(" ")
                    )
                }
                None => format!("a row of {} columns ({COLUMNS})", Layout::widths()),
            };
            return Err(self.error(number, &expected, words.len().to_string()));
        };
        let titles = layout.titles();
        let cell = |column: usize| words.get(column).copied().unwrap_or_default();
        let bad = |column: usize, what: &str| {
            let title = titles.get(column).copied().unwrap_or_default();
            let expected = format!("{what} in column {} ({title})", column + 1);
            self.error(number, &expected, format!("`{}`", Quoted(cell(column))))
        };
        let whole = |column: usize, what: &str| cell(column).parse::<u64>().map_err(|_| bad(column, what));
        let (size, count) = (whole(0, "a size in bytes")?, whole(1, "a count of elements")?);
        let op = if layout.redop { cell(3) } else { "none" };
        let root = 3 + usize::from(layout.redop);
        if layout.root && cell(root).parse::<i64>().is_err() {
            return Err(bad(root, "a root rank"));
        }
        let measured = |first: usize| {
            let time = cell(first).parse::<f64>().ok().filter(|time| time.is_finite() && *time > 0.0);
            let time_us = time.ok_or_else(|| bad(first, "a time in us, above 0"))?;
            let bandwidth = |column: usize| cell(column).parse::<f64>().map_err(|_| bad(column, "a bandwidth in GB/s"));
            let (algbw_gbps, busbw_gbps) = (bandwidth(first + 1)?, bandwidth(first + 2)?);
            if cell(first + 3) != "N/A" && cell(first + 3).parse::<f64>().is_err() {
                return Err(bad(first + 3, "a count of wrong elements, an error or N/A"));
            }
            Ok(Measured { time_us, algbw_gbps, busbw_gbps })
        };
        let first = root + usize::from(layout.root);
        let out_of_place = measured(first)?;
        let in_place = if layout.in_place { Some(measured(first + MEASURED)?) } else { None };
        Ok(LogRow { line: number, size, count, dtype: cell(2).to_owned(), op: op.to_owned(), out_of_place, in_place })
    }

    fn error(&self, line: usize, expected: &str, got: String) -> LogError {
        LogError::Line { name: self.name.clone(), line, expected: expected.to_owned(), got }
    }

    /// The log, once every line is read; `collective` is the caller's.
    fn finish(self, collective: Option<Collective>) -> Result<NcclLog, LogError> {
        let name = self.name;
        if self.rows.is_empty() {
            return Err(LogError::NoRows { name });
        }
        let said = match &self.program {
            Some(program) => {
                let known =
                    PROGRAMS.iter().find(|(known, _)| known == program || known.strip_suffix("_perf") == Some(program));
                let Some(&(_, found)) = known else {
                    return Err(LogError::UnknownCollective { name, program: program.clone() });
                };
                Some((found, "its `# Collective test starting:` line"))
            }
            None => in_file_name(&name).map(|found| (found, "its name")),
        };
        let collective = match (said, collective) {
            (Some((found, from)), Some(expected)) if found != expected => {
                return Err(LogError::OtherCollective { name, found, from, expected });
            }
            (Some((found, _)), _) => found,
            (None, Some(expected)) => expected,
            (None, None) => return Err(LogError::UnnamedCollective { name }),
        };
        let (ranks, nodes) = if self.ranks.is_empty() {
            let ranks =
                ranks_from_bandwidths(collective, &self.rows).ok_or(LogError::NoRanks { name: name.clone() })?;
            (ranks, None)
        } else {
            (self.ranks.len(), Some(self.hosts.len()))
        };
        let (citation, gpus, gpus_per_thread, rows) = (self.citation, self.gpus, self.gpus_per_thread, self.rows);
        Ok(NcclLog { name, citation, collective, ranks, nodes, gpus, gpus_per_thread, rows })
    }
}

/// The title of the wrong-elements column in newer versions (older ones say `error`).
const WRONG: &str = "#wrong";

/// The columns of one call's measurement in a row, out of place and again in place.
const MEASURED: usize = 4;

/// Which columns a table has besides `size count type` and the out-of-place measurement: versions
/// differ in `redop` and `root`, runs in the in-place measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    redop: bool,
    root: bool,
    in_place: bool,
    /// The title of the wrong-elements column: `#wrong`, or `error` in older versions.
    wrong: &'static str,
}

impl Layout {
    /// The layouts of the versions, each at its own width: from the oldest all-gather's (no `redop`)
    /// to today's.
    const KNOWN: [Layout; 6] = [
        Layout { redop: false, root: false, in_place: false, wrong: WRONG },
        Layout { redop: true, root: false, in_place: false, wrong: WRONG },
        Layout { redop: true, root: true, in_place: false, wrong: WRONG },
        Layout { redop: false, root: false, in_place: true, wrong: WRONG },
        Layout { redop: true, root: false, in_place: true, wrong: WRONG },
        Layout { redop: true, root: true, in_place: true, wrong: WRONG },
    ];

    /// The layout column titles name (`size count type [redop] [root] time algbw busbw #wrong ...`,
    /// `error` in older versions for `#wrong`), if `words` are such titles.
    fn of_titles(words: &[&str]) -> Option<Layout> {
        let [size, count, dtype, rest @ ..] = words else { return None };
        (*size == "size" && *count == "count" && *dtype == "type").then_some(())?;
        let (redop, rest) = optional(rest, "redop");
        let (root, rest) = optional(rest, "root");
        let wrong = if rest.get(3) == Some(&"error") { "error" } else { WRONG };
        let measured = |words: &[&str]| words.iter().copied().eq(["time", "algbw", "busbw", wrong]);
        let in_place = match rest.len() {
            MEASURED => false,
            both if both == 2 * MEASURED => measured(&rest[MEASURED..]),
            _ => return None,
        };
        measured(&rest[..MEASURED]).then_some(Layout { redop, root, in_place, wrong })
    }

    /// The layout of a row `width` columns wide, when the table has no titles to say.
    fn of_width(width: usize) -> Option<Layout> {
        Layout::KNOWN.into_iter().find(|layout| layout.width() == width)
    }

    /// The widths of the known layouts, for messages: `7, 8, 9, 11, 12 or 13`.
    fn widths() -> String {
        let widths: Vec<String> = Layout::KNOWN.iter().map(|layout| layout.width().to_string()).collect();
        match widths.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    fn width(self) -> usize {
        self.titles().len()
    }

    fn titles(self) -> Vec<&'static str> {
        let key = ["size", "count", "type"].into_iter().chain(self.redop.then_some("redop"));
        let key = key.chain(self.root.then_some("root"));
        let measured = ["time", "algbw", "busbw", self.wrong];
        key.chain(measured).chain(self.in_place.then_some(measured).into_iter().flatten()).collect()
    }
}

/// Whether `words` begin with `title`, and the words after it.
fn optional<'w, 's>(words: &'w [&'s str], title: &str) -> (bool, &'w [&'s str]) {
    match words.split_first() {
        Some((first, rest)) if *first == title => (true, rest),
        _ => (false, words),
    }
}

/// The ranks a log's rows ran on, told by its bandwidths: nccl-tests prints `busbw = algbw x
/// factor(n)`, each to 0.01 GB/s, and the only `n` up to [`MAX_RANKS`] that every row's figures allow
/// is the ranks. `None` when none or several do, as for broadcast and reduce, whose factor is 1 whatever
/// `n`, or a log whose bandwidths all print as 0.00.
fn ranks_from_bandwidths(collective: Collective, rows: &[LogRow]) -> Option<usize> {
    let measured = || rows.iter().flat_map(|row| std::iter::once(row.out_of_place).chain(row.in_place));
    let allows = |ranks: usize| {
        let factor = collective.busbw_factor(ranks);
        // Each figure is the true one rounded to 0.01: off by at most half of that.
        let slack = 0.005 * (1.0 + factor) + 1e-9;
        measured().all(|m| {
            let off = (m.algbw_gbps * factor - m.busbw_gbps).abs();
            // A figure that is not a number says nothing either way.
            !(off.is_finite() && off > slack)
        })
    };
    let mut allowed = (1..=MAX_RANKS).filter(|&ranks| allows(ranks));
    match (allowed.next(), allowed.next()) {
        (Some(ranks), None) => Some(ranks),
        _ => None,
    }
}

/// Whether `line` is one of NCCL's own messages, which `NCCL_DEBUG` interleaves with the table.
fn is_nccl_message(line: &str) -> bool {
    line.contains("NCCL INFO") || line.contains("NCCL WARN") || line.starts_with("NCCL version")
}

/// The collective a log's file name holds, when it holds exactly one: `h100x8-all_reduce.log`,
/// `alltoall_v100.log`; separators do not count.
fn in_file_name(name: &str) -> Option<Collective> {
    let file = Path::new(name).file_name().map_or(name.into(), |file| file.to_string_lossy());
    let bare = |text: &str| text.to_lowercase().replace(['_', '-'], "");
    let file = bare(&file);
    let keys: Vec<(String, Collective)> =
        PROGRAMS.iter().map(|(program, c)| (bare(program.trim_end_matches("_perf")), *c)).collect();
    let found: Vec<&(String, Collective)> = keys.iter().filter(|(key, _)| file.contains(key.as_str())).collect();
    // `reduce` is inside `allreduce` and `reducescatter`: a name found only within another found one does not count.
    let named: Vec<Collective> = found
        .iter()
        .filter(|(key, _)| !found.iter().any(|(other, _)| other != key && other.contains(key.as_str())))
        .map(|(_, collective)| *collective)
        .collect();
    match named.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One process driving 8 GPUs (`all_reduce_perf -g 8`), as nccl-tests 2.17 prints it, with NCCL's
    /// messages, the summary and what the launcher printed after.
    const ONE_PROCESS: &str = include_str!("../../tests/fixtures/nccl-tests/h100x8-all_reduce.log");

    /// One process per GPU on two hosts (`mpirun -np 4 all_gather_perf -g 1`), as older versions print
    /// it: no collective line, no `Group`, no `root`, an error in place of `#wrong`.
    const ONE_PROCESS_PER_GPU: &str = include_str!("../../tests/fixtures/nccl-tests/a100x4-all_gather.log");

    fn parse(name: &str, text: &str) -> Result<NcclLog, LogError> {
        NcclLog::parse(name, text, None)
    }

    #[test]
    fn a_log_of_one_process_on_eight_gpus_gives_its_ranks_citation_and_rows() {
        let log = parse("h100.log", ONE_PROCESS).unwrap();
        assert_eq!((log.collective, log.ranks, log.nodes), (Collective::AllReduce, 8, Some(1)));
        assert_eq!(log.gpus, ["NVIDIA H100 80GB HBM3"]);
        assert_eq!(log.gpus_per_thread, Some(8), "nccl-tests' -g 8");
        assert_eq!(log.citation.len(), 2);
        assert!(log.citation[0].starts_with("made up for kernbench's tests, in the format"), "{:?}", log.citation);
        // The table ends at the launcher's text after it: the next case's row is not this log's.
        assert_eq!(log.sizes(), [1024, 2048, 4096]);
        let row = log.at_size(2048).unwrap();
        assert_eq!((row.line, row.count, row.dtype.as_str(), row.op.as_str()), (24, 512, "float", "sum"));
        assert_eq!(row.out_of_place, Measured { time_us: 24.5, algbw_gbps: 0.08, busbw_gbps: 0.15 });
        assert_eq!(row.in_place.unwrap().time_us, 35.0);
        assert!(row.noisy() && !log.rows[0].noisy());
        assert_eq!(log.hardware(), "8 ranks on 1 node (NVIDIA H100 80GB HBM3)");
    }

    #[test]
    fn a_log_of_one_process_per_gpu_on_two_nodes_takes_its_collective_from_its_name() {
        let log = parse("logs/a100x4-all_gather.log", ONE_PROCESS_PER_GPU).unwrap();
        assert_eq!((log.collective, log.ranks, log.nodes), (Collective::AllGather, 4, Some(2)));
        assert_eq!(log.gpus_per_thread, Some(1));
        // Rows are as nccl-tests sized them, the empty one too; only sizes above 0 can be simulated.
        assert_eq!(log.rows.len(), 3);
        assert_eq!(log.sizes(), [4096, 1048576]);
        assert_eq!(log.at_size(1048576).unwrap().time_ns(), 190_500.0);
        assert_eq!(log.name, "logs/a100x4-all_gather.log");
    }

    #[test]
    fn rows_without_in_place_columns_and_without_titles_are_read() {
        let without_in_place = ONE_PROCESS.replace("#wrong     time   algbw   busbw #wrong", "#wrong");
        let without_in_place: String = without_in_place
            .lines()
            .map(|line| if line.starts_with("        ") { &line[..line.len().min(86)] } else { line })
            .map(|line| format!("{line}\n"))
            .collect();
        let log = parse("h100.log", &without_in_place).unwrap();
        assert_eq!(log.rows.len(), 3);
        assert!(log.rows.iter().all(|row| row.in_place.is_none() && !row.noisy()), "{:?}", log.rows);
        let untitled: String =
            ONE_PROCESS.lines().filter(|line| !line.contains("size")).map(|l| format!("{l}\n")).collect();
        let times = |log: NcclLog| {
            log.rows.into_iter().map(|row| (row.size, row.out_of_place, row.in_place)).collect::<Vec<_>>()
        };
        assert_eq!(times(parse("h100.log", &untitled).unwrap()), times(parse("h100.log", ONE_PROCESS).unwrap()));
    }

    #[test]
    fn a_row_that_cannot_be_read_names_the_file_the_line_and_what_was_expected() {
        let cut = ONE_PROCESS.replace("0.08    0.15    N/A    35.00    0.06    0.10    N/A", "");
        assert_eq!(
            parse("h100.log", &cut).unwrap_err().to_string(),
            "h100.log:24: expected a row of 13 columns, as the table's titles (size count type redop root time \
             algbw busbw #wrong time algbw busbw #wrong), got 6"
        );
        let untitled: String = cut.lines().filter(|line| !line.contains("size")).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            parse("h100.log", &untitled).unwrap_err().to_string(),
            "h100.log:23: expected a row of 7, 8, 9, 11, 12 or 13 columns (size count type [redop] [root] time \
             algbw busbw #wrong [time algbw busbw #wrong]), got 6"
        );
        let cases = [
            ("24.50", "-", "expected a time in us, above 0 in column 6 (time), got `-`"),
            ("24.50", "0", "expected a time in us, above 0 in column 6 (time), got `0`"),
            ("     -1    24.50", "     x    24.50", "expected a root rank in column 5 (root), got `x`"),
            (
                "0.15    N/A",
                "0.15    ?",
                "expected a count of wrong elements, an error or N/A in column 9 (#wrong), got `?`",
            ),
            ("0.08    0.15", "fast    0.15", "expected a bandwidth in GB/s in column 7 (algbw), got `fast`"),
            ("   512     float", "   5x2     float", "expected a count of elements in column 2 (count), got `5x2`"),
        ];
        for (from, to, message) in cases {
            let text = ONE_PROCESS.replacen(from, to, 1);
            let error = parse("h100.log", &text).unwrap_err().to_string();
            assert!(error.starts_with("h100.log:2") && error.ends_with(message), "{from} -> {to}: {error}");
        }
    }

    #[test]
    fn bandwidths_may_be_infinite_or_not_a_number() {
        let text = ONE_PROCESS.replacen("0.04    0.07      0    23.90", "inf    -nan      0    23.90", 1);
        let row = &parse("h100.log", &text).unwrap().rows[0];
        assert!(row.out_of_place.algbw_gbps.is_infinite() && row.out_of_place.busbw_gbps.is_nan());
    }

    #[test]
    fn a_log_without_rows_without_ranks_or_of_another_collective_says_so_in_one_line() {
        let header_only: String = ONE_PROCESS.lines().take(20).map(|l| format!("{l}\n")).collect();
        let no_ranks: String =
            ONE_PROCESS.lines().filter(|line| !line.contains("Rank")).map(|l| format!("{l}\n")).collect();
        let hypercube = ONE_PROCESS.replace("starting: all_reduce_perf", "starting: hypercube_perf");
        let cases = [
            (parse("h100.log", &header_only), "h100.log: no rows of results: expected nccl-tests' table"),
            (parse("h100.log", &no_ranks), "h100.log: how many ranks? expected nccl-tests' device lines"),
            (
                parse("h100.log", &hypercube),
                "h100.log: `hypercube_perf` is not a collective kernbench simulates: expected one of all_reduce_perf,",
            ),
            (parse("a100.log", ONE_PROCESS_PER_GPU), "a100.log: which collective?"),
            (
                parse("a100-reduce-vs-all_gather.log", ONE_PROCESS_PER_GPU),
                "a100-reduce-vs-all_gather.log: which collective?",
            ),
            (
                NcclLog::parse("all_gather.log", ONE_PROCESS, Some(Collective::AllGather)),
                "all_gather.log measured all_reduce (as its `# Collective test starting:` line says), not all_gather",
            ),
            (
                NcclLog::parse("a100-all_gather.log", ONE_PROCESS_PER_GPU, Some(Collective::Broadcast)),
                "a100-all_gather.log measured all_gather (as its name says), not broadcast",
            ),
        ];
        for (result, start) in cases {
            let message = result.unwrap_err().to_string();
            assert!(message.starts_with(start) && !message.contains('\n'), "{message}");
        }
        let named = NcclLog::parse("a100.log", ONE_PROCESS_PER_GPU, Some(Collective::AllGather)).unwrap();
        assert_eq!(named.collective, Collective::AllGather);
    }

    #[test]
    fn a_bad_device_line_is_an_error_and_two_gpu_kinds_are_both_named() {
        let bad = ONE_PROCESS.replacen("on     node-a device  3", "on     node-a gpu  3", 1);
        let message = parse("h100.log", &bad).unwrap_err().to_string();
        assert!(message.starts_with("h100.log:12: expected a device line"), "{message}");
        let mixed = ONE_PROCESS.replacen("[0000:db:00] NVIDIA H100 80GB HBM3", "[0000:db:00] NVIDIA H200", 1);
        assert_eq!(
            parse("h100.log", &mixed).unwrap().hardware(),
            "8 ranks on 1 node (NVIDIA H100 80GB HBM3, NVIDIA H200)"
        );
    }

    #[test]
    fn a_file_name_names_a_collective_only_when_it_holds_one() {
        let cases = [
            ("h100x8-all_reduce-nccl2.21.log", Some(Collective::AllReduce)),
            ("dir/allgather.log", Some(Collective::AllGather)),
            ("reduce_scatter_perf.log", Some(Collective::ReduceScatter)),
            ("ALL_TO_ALL.txt", Some(Collective::AllToAll)),
            ("alltoall_perf.out", Some(Collective::AllToAll)),
            ("h100x8-sendrecv.log", Some(Collective::SendRecv)),
            ("broadcast.log", Some(Collective::Broadcast)),
            ("reduce.log", Some(Collective::Reduce)),
            ("all_reduce/run.log", None),
            ("gather.log", None),
            ("all_reduce_and_broadcast.log", None),
        ];
        for (name, collective) in cases {
            assert_eq!(in_file_name(name), collective, "{name}");
        }
    }

    #[test]
    fn a_log_that_does_not_fit_the_system_says_what_would() {
        let log = parse("h100.log", ONE_PROCESS).unwrap();
        assert!(log.check_fits(&System::shape(8, 2, 2, 4).unwrap()).is_ok());
        let message = log.check_fits(&System::shape(4, 1, 1, 1).unwrap()).unwrap_err().to_string();
        assert_eq!(
            message,
            "h100.log has 8 ranks on 1 node (NVIDIA H100 80GB HBM3); the system has 4 SIPs: give a system of 8 SIPs \
             (--system)"
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_says_why() {
        let message = NcclLog::read(Path::new(env!("CARGO_MANIFEST_DIR")), None).unwrap_err().to_string();
        assert!(message.starts_with("cannot read ") && message.contains("os error"), "{message}");
    }

    #[test]
    fn titles_without_redop_or_without_their_hash_name_the_columns() {
        // The oldest all-gather tables have no `redop`; a log that went through a terminal lost its `#`s.
        let text = "\
#   Rank  0 Pid 1 on a device  0 [0x00] A100-SXM4-40GB
#   Rank  1 Pid 1 on a device  1 [0x00] A100-SXM4-40GB
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
        1024           128   float    35.38    0.03    0.01    N/A    34.53    0.03    0.01    N/A
";
        let row = &parse("all_gather.log", text).unwrap().rows[0];
        assert_eq!((row.size, row.op.as_str(), row.in_place.unwrap().time_us), (1024, "none", 34.53));
        let unhashed = ONE_PROCESS.replace("#       size", "       size");
        let cut = unhashed.replacen("0.08    0.15    N/A    35.00    0.06    0.10    N/A", "", 1);
        let message = parse("h100.log", &cut).unwrap_err().to_string();
        assert!(message.contains("expected a row of 13 columns, as the table's titles"), "{message}");
    }

    #[test]
    fn without_device_lines_the_bandwidths_tell_the_ranks() {
        // As published from a terminal: the table alone, at sizes large enough for busbw / algbw to tell
        // 16 ranks (2 (16 - 1) / 16 = 1.875) from 15 or 17.
        let rows = "\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 536870912     134217728     float     sum      -1   2622.9  204.69  383.79      0   2622.4  204.72  383.86      0
8589934592    2147483648     float     sum      -1    41145  208.77  391.45      0    41008  209.47  392.76      0
";
        let log = parse("h100x16-all_reduce.log", rows).unwrap();
        assert_eq!((log.ranks, log.nodes, log.gpus.len()), (16, None, 0));
        assert_eq!(log.hardware(), "16 ranks (by busbw / algbw: no device lines)");
        // A broadcast's busbw is its algbw whatever the ranks; tiny sizes print 0.00 for both.
        let broadcast = parse("broadcast.log", &rows.replace("383.79", "204.69").replace("383.86", "204.72"));
        let tiny = parse("all_reduce.log", "8 2 float sum -1 30.0 0.00 0.00 0 30.1 0.00 0.00 0\n");
        for unknown in [broadcast, tiny] {
            assert!(matches!(unknown, Err(LogError::NoRanks { .. })), "{unknown:?}");
        }
    }

    /// The published logs under `configs/logs/`, whatever they are (none is fine).
    #[test]
    fn every_log_under_configs_logs_is_read() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/logs");
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|extension| extension == "log") {
                let log = NcclLog::read(&path, None).unwrap_or_else(|e| panic!("{e}"));
                assert!(!log.sizes().is_empty() && log.ranks > 0, "{}", path.display());
            }
        }
    }
}
