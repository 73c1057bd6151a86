//! The simulated system: how many SIPs, cubes and PEs, and how fast their links are.
//!
//! Two stages: [`SystemSpec`] is what a JSON file says; [`System`] is a spec that passed every check,
//! so nothing downstream has to re-check sizes or rates.
//!
//! The JSON shape is documented on [`SystemSpec`].

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod error;

pub use error::{MulticastError, SpecError};

use crate::machine::protocol::{Carriage, Protocol, ProtocolNotGiven, ProtocolsSpec, StepSpec};
use crate::machine::{CubeCoord, LinkClass, PeId};

/// Latency and bandwidth of one link class. Units: ns, and GB/s = 1e9 bytes/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Time from the first byte leaving to the first byte arriving, in ns.
    pub latency_ns: f64,
    /// Bytes per second over one direction of one link, in GB/s (1e9 bytes/s).
    pub bandwidth_gbps: f64,
    /// Per protocol, what one message's step costs over this class beyond its latency, in ns (see
    /// [`protocol`](crate::machine::protocol)); 0 when left out.
    #[serde(default, skip_serializing_if = "is_default")]
    pub step_ns: StepSpec,
}

impl LinkSpec {
    /// A link of `latency_ns` and `bandwidth_gbps`, with no protocol step costs.
    pub const fn new(latency_ns: f64, bandwidth_gbps: f64) -> LinkSpec {
        LinkSpec { latency_ns, bandwidth_gbps, step_ns: StepSpec { simple: 0.0, ll: 0.0, ll128: 0.0 } }
    }
}

/// How SIPs are connected to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SipInterconnect {
    /// Each SIP links to the next and the previous one.
    Ring,
    /// Every pair of SIPs has its own link.
    FullyConnected,
    /// Every SIP links to one switch; a SIP-to-SIP route crosses two links.
    Switched,
}

impl SipInterconnect {
    /// The name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            SipInterconnect::Ring => "ring",
            SipInterconnect::FullyConnected => "fully_connected",
            SipInterconnect::Switched => "switched",
        }
    }
}

impl fmt::Display for SipInterconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rates of a PE. Units: GFLOP/s = 1e9 element operations/s; GB/s = 1e9 bytes/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeSpec {
    /// Elementwise reduction rate, in 1e9 elements per second.
    pub compute_gflops: f64,
    /// Load/store rate between a PE and its buffers, in GB/s.
    pub memory_gbps: f64,
    /// Time a PE spends handing one message to the network (the `o` of LogP), in ns; 0 is allowed.
    #[serde(default = "default_injection_ns")]
    pub injection_ns: f64,
    /// How many of the PE's lanes inject, reduce, load and store at once, each on an engine of its
    /// own (a GPU runs its channels on separate SMs); lanes beyond it wait for an engine. At least 1,
    /// at most [`System::MAX_ENGINES`]; 1 when left out.
    #[serde(default = "default_engines")]
    pub engines: usize,
}

fn default_engines() -> usize {
    1
}

fn default_injection_ns() -> f64 {
    PeSpec::default().injection_ns
}

/// What every collective call costs before its first message: launching its kernels and setting the
/// call up. Unit: ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CallSpec {
    /// Time from the call to its kernels' start on every PE, in ns (a GPU's kernel launch and the
    /// library's set-up); 0 when left out.
    pub launch_ns: f64,
    /// When one host thread drives several GPUs (nccl-tests' `-g`), it launches their kernels one after
    /// another: each further GPU's kernel starts this much later, in ns; 0 when left out. A run says how
    /// many GPUs a thread drives (`RunOptions::gpus_per_thread`, 1 by default: no stagger).
    #[serde(skip_serializing_if = "is_zero")]
    pub launch_per_gpu_ns: f64,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// The size of each SIP's cube mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    /// Cubes per row (the x extent).
    pub w: usize,
    /// Rows of cubes (the y extent).
    pub h: usize,
}

/// The three link classes' figures. A class left out of the JSON keeps its built-in figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinksSpec {
    /// Between neighbouring PEs of a cube's ring.
    pub intra_cube: LinkSpec,
    /// Between neighbouring cubes of a SIP's NoC mesh.
    pub inter_cube: LinkSpec,
    /// Between SIPs (UCIe).
    pub inter_sip: LinkSpec,
}

impl Default for LinksSpec {
    /// Intra-cube fastest, inter-SIP slowest: the order of reach.
    fn default() -> Self {
        LinksSpec {
            intra_cube: LinkSpec::new(20.0, 256.0),
            inter_cube: LinkSpec::new(60.0, 128.0),
            inter_sip: LinkSpec::new(500.0, 64.0),
        }
    }
}

impl LinksSpec {
    /// The classes `links` holds: every class but [`LinkClass::InterNode`], whose figures are those
    /// of `nodes.nic`.
    pub const CLASSES: [LinkClass; 3] = [LinkClass::IntraCube, LinkClass::InterCube, LinkClass::InterSip];

    /// The figures of one class; for [`LinkClass::InterNode`], which `links` does not hold, those of
    /// [`NodesSpec::DEFAULT_NIC`] (a system's own are [`System::link`]'s).
    pub fn get(&self, class: LinkClass) -> LinkSpec {
        match class {
            LinkClass::IntraCube => self.intra_cube,
            LinkClass::InterCube => self.inter_cube,
            LinkClass::InterSip => self.inter_sip,
            LinkClass::InterNode => NodesSpec::DEFAULT_NIC,
        }
    }
}

impl Default for PeSpec {
    fn default() -> Self {
        PeSpec { compute_gflops: 512.0, memory_gbps: 512.0, injection_ns: 10.0, engines: default_engines() }
    }
}

/// A system as a JSON file describes it, before any check.
///
/// ```json
/// {"sips": 4, "mesh": {"w": 4, "h": 4}, "pes_per_cube": 8,
///  "links": {"intra_cube": {"latency_ns": 20, "bandwidth_gbps": 256},
///            "inter_cube": {"latency_ns": 60, "bandwidth_gbps": 128},
///            "inter_sip":  {"latency_ns": 500, "bandwidth_gbps": 64}},
///  "sip_interconnect": "ring", "ipcq_depth": 4,
///  "pe": {"compute_gflops": 512, "memory_gbps": 512, "injection_ns": 10, "engines": 1},
///  "call": {"launch_ns": 0}}
/// ```
///
/// A system that carries messages by NCCL's protocols gives each link class a step cost per protocol
/// and each protocol its figures (see [`protocol`](crate::machine::protocol)):
///
/// ```json
/// {"links": {"inter_sip": {"latency_ns": 500, "bandwidth_gbps": 370,
///                          "step_ns": {"simple": 3400, "ll": 600, "ll128": 1900}}},
///  "protocols": {"simple": {"base_ns": 8400},
///                "ll": {"base_ns": 6600, "pe_gbps": 141},
///                "ll128": {"base_ns": 14000, "lane_gbps": 36.7}}}
/// ```
///
/// Only the shape (`sips`, `mesh`, `pes_per_cube`) is required; every other field, and each link class
/// inside `links`, falls back to the built-in value, so a file can override just what it studies.
///
/// Turn it into a [`System`] with [`System::from_spec`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    /// Number of SIPs.
    pub sips: usize,
    /// Each SIP's cube mesh.
    pub mesh: MeshSpec,
    /// PEs in each cube's ring.
    pub pes_per_cube: usize,
    /// Link figures per class.
    #[serde(default)]
    pub links: LinksSpec,
    /// How SIPs are connected.
    #[serde(default = "default_interconnect")]
    pub sip_interconnect: SipInterconnect,
    /// Slots in each directed neighbour queue.
    #[serde(default = "default_ipcq_depth")]
    pub ipcq_depth: usize,
    /// Every PE's rates.
    #[serde(default)]
    pub pe: PeSpec,
    /// What each collective call costs before its first message.
    #[serde(default, skip_serializing_if = "is_default")]
    pub call: CallSpec,
    /// The protocols messages can be carried by, with their figures (see
    /// [`protocol`](crate::machine::protocol)); none when left out: every message is carried as data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<ProtocolsSpec>,
    /// How SIPs group into nodes joined by NICs and a network switch; left out, the system is one
    /// node, as it was before nodes existed (and its JSON has no `nodes`).
    ///
    /// ```json
    /// {"sips": 16, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
    ///  "nodes": {"sips_per_node": 8, "nics_per_node": 8, "nic": {"latency_ns": 3000, "bandwidth_gbps": 50}}}
    /// ```
    ///
    /// Two nodes of 8 SIPs, each SIP with a NIC of its own. See [`NodesSpec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodesSpec>,
    /// What the switch of a `switched` system does beside forwarding: multicast and in-switch
    /// reduction (NVLink SHARP, NVLS). Left out, the switch only forwards, as it did before (and the
    /// JSON has no `switch`); given on a system that is not `switched`, the spec is rejected.
    ///
    /// ```json
    /// {"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
    ///  "switch": {"multicast": true, "reduce_gbps": 480}}
    /// ```
    ///
    /// See [`SwitchSpec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchSpec>,
}

/// What a switch computes (NVLink SHARP): with `multicast`, a multicast object spans a buffer on
/// every SIP behind the switch, so one store reaches them all and one load comes back reduced
/// (`tl.multicast`, `tl.multimem_ld_reduce`, `tl.multimem_st`, `tl.multimem_red`). In a system of
/// several nodes each node's switch has these figures; a multicast object spans one node.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Whether the switch multicasts and reduces: `false` describes a switch without NVLS (an
    /// A100's NVSwitch), which only forwards.
    pub multicast: bool,
    /// The rate, in GB/s of reduced result, at which the switch reduces: one resource for the whole
    /// switch, so reductions for several requesters at once share it.
    pub reduce_gbps: f64,
}

/// How SIPs group into nodes, and the NICs and network switch that join the nodes.
///
/// SIPs `k * sips_per_node .. (k + 1) * sips_per_node` are node `k`. Inside a node SIPs are linked as
/// `sip_interconnect` says, among the node's SIPs only; a system of several nodes needs it `switched`
/// (each node then has a switch of its own), because a node's NICs hang off its switch, each by one
/// `inter_sip` link each way, and every NIC has one link each way to the network switch, with the
/// figures of `nic`. A message between nodes on lane `l` leaves its node by the NIC of rail
/// `l mod nics_per_node` and enters the other node by the NIC of the same rail, as NCCL spreads its
/// channels over the NICs of rail-aligned nodes. It crosses two `inter_node` links (NIC to network
/// switch, network switch to NIC), so `nic.latency_ns` is half the way from NIC to NIC.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodesSpec {
    /// SIPs in each node: at least 1, and `sips` must be a multiple of it.
    pub sips_per_node: usize,
    /// NICs of each node, one per rail: 1 to `sips_per_node`; one per SIP when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nics_per_node: Option<usize>,
    /// Each NIC's link to the network switch; [`NodesSpec::DEFAULT_NIC`] when left out.
    #[serde(default = "default_nic")]
    pub nic: LinkSpec,
}

impl NodesSpec {
    /// A NIC of 400 Gb/s (InfiniBand NDR, 50 GB/s) and 1 us to the network switch.
    pub const DEFAULT_NIC: LinkSpec = LinkSpec::new(1000.0, 50.0);
}

fn default_nic() -> LinkSpec {
    NodesSpec::DEFAULT_NIC
}

/// Checks `nodes` against the rest of `spec`, whose sizes are checked already.
fn check_nodes(spec: &SystemSpec, nodes: &NodesSpec) -> Result<(), SpecError> {
    let per_node = nodes.sips_per_node;
    if per_node == 0 {
        return Err(SpecError::ZeroSize { field: "nodes.sips_per_node" });
    }
    if spec.sips % per_node != 0 {
        return Err(SpecError::PartialNode { sips: spec.sips, sips_per_node: per_node });
    }
    let nics = nodes.nics_per_node.unwrap_or(per_node);
    if !(1..=per_node).contains(&nics) {
        return Err(SpecError::BadNics { nics, sips_per_node: per_node });
    }
    if spec.sips > per_node && spec.sip_interconnect != SipInterconnect::Switched {
        return Err(SpecError::NodesNotSwitched { interconnect: spec.sip_interconnect });
    }
    check_time(format_args!("nodes.nic.latency_ns"), nodes.nic.latency_ns)?;
    for protocol in Protocol::ALL {
        check_time(format_args!("nodes.nic.step_ns.{}", protocol.key()), nodes.nic.step_ns.get(protocol))?;
    }
    check_rate(format_args!("nodes.nic.bandwidth_gbps"), nodes.nic.bandwidth_gbps)
}

impl SystemSpec {
    /// The figures of a link class as the spec gives them: `nodes.nic` for
    /// [`LinkClass::InterNode`] (`None` without `nodes`), `links` for the others.
    pub fn link(&self, class: LinkClass) -> Option<LinkSpec> {
        match class {
            LinkClass::InterNode => self.nodes.map(|nodes| nodes.nic),
            _ => Some(self.links.get(class)),
        }
    }

    /// [`SystemSpec::link`], to change.
    pub fn link_mut(&mut self, class: LinkClass) -> Option<&mut LinkSpec> {
        match class {
            LinkClass::IntraCube => Some(&mut self.links.intra_cube),
            LinkClass::InterCube => Some(&mut self.links.inter_cube),
            LinkClass::InterSip => Some(&mut self.links.inter_sip),
            LinkClass::InterNode => self.nodes.as_mut().map(|nodes| &mut nodes.nic),
        }
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn default_interconnect() -> SipInterconnect {
    SipInterconnect::Ring
}

fn default_ipcq_depth() -> usize {
    4
}

impl Default for SystemSpec {
    /// The built-in system: 4 SIPs x 4x4 cubes x 8 PEs on a ring of SIPs.
    fn default() -> Self {
        SystemSpec {
            sips: 4,
            mesh: MeshSpec { w: 4, h: 4 },
            pes_per_cube: 8,
            links: LinksSpec::default(),
            sip_interconnect: default_interconnect(),
            ipcq_depth: default_ipcq_depth(),
            pe: PeSpec::default(),
            call: CallSpec::default(),
            protocols: None,
            nodes: None,
            switch: None,
        }
    }
}

/// A system that passed every check: sizes at least 1, rates and times in range, at most
/// [`System::MAX_PES`] PEs. Read it through its accessors.
///
/// # Examples
/// ```
/// use kernbench_core::{LinkClass, PeId, System};
/// let system = System::builtin();
/// assert_eq!((system.sips(), system.mesh(), system.pes_per_cube()), (4, (4, 4), 8));
/// assert_eq!(system.total_pes(), 512);
/// assert!(system.link(LinkClass::InterSip).bandwidth_gbps < system.link(LinkClass::IntraCube).bandwidth_gbps);
/// assert!(system.contains(PeId::new(3, 15, 7)));
/// assert!(!system.contains(PeId::new(4, 0, 0)));
///
/// let small = System::shape(2, 1, 2, 4).unwrap();
/// assert_eq!(small.all_pes().count(), 16);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SystemSpec", into = "SystemSpec")]
pub struct System {
    spec: SystemSpec,
}

impl Default for System {
    fn default() -> Self {
        System::builtin()
    }
}

impl TryFrom<SystemSpec> for System {
    type Error = SpecError;

    fn try_from(spec: SystemSpec) -> Result<Self, Self::Error> {
        System::from_spec(spec)
    }
}

impl From<System> for SystemSpec {
    fn from(system: System) -> Self {
        system.spec
    }
}

impl System {
    /// The most PEs a system may have: 2^24 (16,777,216), and every index fits a `u32`.
    ///
    /// A plan and a run of the hierarchical all-reduce take about 3 KiB per PE at their peak (release
    /// build: 3.1 GiB for 2^20 PEs with 4 f32 each or timing-only, on one thread), so a run over 2^22
    /// PEs fits a machine of 24 GiB and one over 2^24 needs about 48 GiB. The `kernbench` commands
    /// refuse a call whose estimated memory passes the memory available before anything is allocated
    /// (`--max-memory`); a program using the library sets its own limit (`Communicator::max_memory`).
    /// Topologies with more neighbours per PE need more per PE and state their own, lower bounds
    /// (`hypercube` and `full`, in the plan's topologies).
    pub const MAX_PES: usize = 1 << 24;

    /// The most engines a PE may have: more than any GPU has SMs to run channels on.
    pub const MAX_ENGINES: usize = 1024;

    /// The most slots an IPCQ may have.
    pub const MAX_IPCQ_DEPTH: usize = 1 << 16;

    /// The slowest bandwidth or rate a spec may give (GB/s or GFLOP/s): 1 MB/s. Far slower than any
    /// real link, and slow enough that a run of any size the simulator holds stays finite in time.
    pub const MIN_RATE: f64 = 1e-3;

    /// The longest latency or per-message overhead a spec may give, in ns: 1000 s. Zero is allowed (an
    /// idealised link).
    pub const MAX_TIME_NS: f64 = 1e12;

    /// The built-in system: 4 SIPs x 4x4 cubes x 8 PEs, SIPs on a ring, default link figures.
    pub fn builtin() -> System {
        System { spec: SystemSpec::default() }
    }

    /// A system of the given shape with the built-in links, interconnect, queue depth and PE rates.
    ///
    /// # Errors
    /// [`SpecError::ZeroSize`] or [`SpecError::TooLarge`].
    pub fn shape(sips: usize, w: usize, h: usize, pes_per_cube: usize) -> Result<System, SpecError> {
        System::from_spec(SystemSpec { sips, mesh: MeshSpec { w, h }, pes_per_cube, ..SystemSpec::default() })
    }

    /// Checks a spec.
    ///
    /// # Errors
    /// [`SpecError::ZeroSize`], [`SpecError::TooLarge`], [`SpecError::BadRate`], [`SpecError::BadTime`],
    /// [`SpecError::BadEngines`], [`SpecError::ZeroIpcqDepth`], [`SpecError::DeepIpcq`],
    /// [`SpecError::PartialNode`], [`SpecError::BadNics`] or [`SpecError::NodesNotSwitched`], naming
    /// the field.
    pub fn from_spec(spec: SystemSpec) -> Result<System, SpecError> {
        let sizes = [
            ("sips", spec.sips),
            ("mesh.w", spec.mesh.w),
            ("mesh.h", spec.mesh.h),
            ("pes_per_cube", spec.pes_per_cube),
        ];
        if let Some(&(field, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(SpecError::ZeroSize { field });
        }
        let total = sizes.iter().try_fold(1usize, |acc, &(_, v)| acc.checked_mul(v));
        if total.is_none_or(|t| t > System::MAX_PES) {
            return Err(SpecError::TooLarge {
                sips: spec.sips,
                w: spec.mesh.w,
                h: spec.mesh.h,
                pes_per_cube: spec.pes_per_cube,
            });
        }
        for class in LinksSpec::CLASSES {
            let link = spec.links.get(class);
            check_time(format_args!("links.{class}.latency_ns"), link.latency_ns)?;
            check_rate(format_args!("links.{class}.bandwidth_gbps"), link.bandwidth_gbps)?;
        }
        check_rate(format_args!("pe.compute_gflops"), spec.pe.compute_gflops)?;
        check_rate(format_args!("pe.memory_gbps"), spec.pe.memory_gbps)?;
        check_time(format_args!("pe.injection_ns"), spec.pe.injection_ns)?;
        if !(1..=System::MAX_ENGINES).contains(&spec.pe.engines) {
            return Err(SpecError::BadEngines { engines: spec.pe.engines });
        }
        check_time(format_args!("call.launch_ns"), spec.call.launch_ns)?;
        check_time(format_args!("call.launch_per_gpu_ns"), spec.call.launch_per_gpu_ns)?;
        for class in LinksSpec::CLASSES {
            for protocol in Protocol::ALL {
                let step = spec.links.get(class).step_ns.get(protocol);
                check_time(format_args!("links.{class}.step_ns.{}", protocol.key()), step)?;
            }
        }
        if let Some(protocols) = &spec.protocols {
            if protocols.given().next().is_none() {
                return Err(SpecError::NoProtocols);
            }
            for protocol in protocols.given() {
                let figures = protocols.get(protocol).unwrap_or_default();
                check_time(format_args!("protocols.{}.base_ns", protocol.key()), figures.base_ns)?;
                if let Some(rate) = figures.lane_gbps {
                    check_rate(format_args!("protocols.{}.lane_gbps", protocol.key()), rate)?;
                }
                if let Some(rate) = figures.pe_gbps {
                    check_rate(format_args!("protocols.{}.pe_gbps", protocol.key()), rate)?;
                }
            }
        }
        if let Some(nodes) = &spec.nodes {
            check_nodes(&spec, nodes)?;
        }
        if let Some(switch) = &spec.switch {
            if spec.sip_interconnect != SipInterconnect::Switched {
                return Err(SpecError::SwitchNotSwitched { interconnect: spec.sip_interconnect });
            }
            check_rate(format_args!("switch.reduce_gbps"), switch.reduce_gbps)?;
        }
        if spec.ipcq_depth == 0 {
            return Err(SpecError::ZeroIpcqDepth);
        }
        if spec.ipcq_depth > System::MAX_IPCQ_DEPTH {
            return Err(SpecError::DeepIpcq { depth: spec.ipcq_depth });
        }
        Ok(System { spec })
    }

    /// Parses and checks a JSON spec.
    ///
    /// # Errors
    /// [`SpecError::Json`] for malformed JSON, unknown or missing fields; otherwise as
    /// [`System::from_spec`].
    pub fn from_json_str(json: &str) -> Result<System, SpecError> {
        System::from_spec(serde_json::from_str(json)?)
    }

    /// Reads, parses and checks a JSON spec file.
    ///
    /// # Errors
    /// [`SpecError::Io`] when the file cannot be read, [`SpecError::InFile`] wrapping what
    /// [`System::from_json_str`] says about its content.
    pub fn from_file(path: &Path) -> Result<System, SpecError> {
        let text = crate::files::read_text(path).map_err(|source| SpecError::Io { path: path.to_owned(), source })?;
        System::from_json_str(&text).map_err(|e| SpecError::InFile { path: path.to_owned(), source: Box::new(e) })
    }

    /// The checked spec.
    pub fn spec(&self) -> &SystemSpec {
        &self.spec
    }

    /// Number of SIPs.
    pub fn sips(&self) -> usize {
        self.spec.sips
    }

    /// The cube mesh of each SIP, `(w, h)`.
    pub fn mesh(&self) -> (usize, usize) {
        (self.spec.mesh.w, self.spec.mesh.h)
    }

    /// Cubes in each SIP: `w * h`.
    pub fn cubes_per_sip(&self) -> usize {
        self.spec.mesh.w * self.spec.mesh.h
    }

    /// PEs in each cube.
    pub fn pes_per_cube(&self) -> usize {
        self.spec.pes_per_cube
    }

    /// PEs in each SIP.
    pub fn pes_per_sip(&self) -> usize {
        self.cubes_per_sip() * self.spec.pes_per_cube
    }

    /// PEs in the whole system.
    pub fn total_pes(&self) -> usize {
        self.spec.sips * self.pes_per_sip()
    }

    /// The figures of a link class: [`LinkClass::InterNode`]'s are `nodes.nic`, or
    /// [`NodesSpec::DEFAULT_NIC`] in a system without `nodes`, whose routes never cross one.
    pub fn link(&self, class: LinkClass) -> LinkSpec {
        match (class, self.spec.nodes) {
            (LinkClass::InterNode, Some(nodes)) => nodes.nic,
            _ => self.spec.links.get(class),
        }
    }

    /// Nodes in the system: `sips / nodes.sips_per_node`, or 1 without `nodes`.
    pub fn nodes(&self) -> usize {
        self.spec.sips / self.sips_per_node()
    }

    /// SIPs in each node: `sips` without `nodes`.
    pub fn sips_per_node(&self) -> usize {
        self.spec.nodes.map_or(self.spec.sips, |nodes| nodes.sips_per_node)
    }

    /// NICs of each node that routes cross, one per rail: `nodes.nics_per_node` (one per SIP when
    /// left out) in a system of several nodes, 0 in a system of one, whose routes never leave it.
    pub fn nics_per_node(&self) -> usize {
        match self.spec.nodes {
            Some(nodes) if self.nodes() > 1 => nodes.nics_per_node.unwrap_or(nodes.sips_per_node),
            _ => 0,
        }
    }

    /// The node a SIP belongs to.
    pub fn node_of(&self, sip: u32) -> u32 {
        // At most 2^24 SIPs (System::MAX_PES): the size fits u32.
        sip / self.sips_per_node() as u32
    }

    /// How SIPs are connected.
    pub fn interconnect(&self) -> SipInterconnect {
        self.spec.sip_interconnect
    }

    /// Slots in each directed neighbour queue (at least 1).
    pub fn ipcq_depth(&self) -> usize {
        self.spec.ipcq_depth
    }

    /// Every PE's rates.
    pub fn pe_spec(&self) -> PeSpec {
        self.spec.pe
    }

    /// What each collective call costs before its first message.
    pub fn call_spec(&self) -> CallSpec {
        self.spec.call
    }

    /// The protocols the system carries messages by, with their figures; `None` when it gives none.
    pub fn protocols(&self) -> Option<&ProtocolsSpec> {
        self.spec.protocols.as_ref()
    }

    /// The per-protocol step costs of a link class.
    pub fn step_ns(&self, class: LinkClass) -> StepSpec {
        self.link(class).step_ns
    }

    /// What carrying a run's messages by `protocol` costs on this system; `None` carries them as data
    /// (the only way on a system without protocols).
    ///
    /// # Errors
    /// [`ProtocolNotGiven`] for a protocol the system gives no figures for.
    pub fn carriage(&self, protocol: Option<Protocol>) -> Result<Carriage, ProtocolNotGiven> {
        let Some(protocol) = protocol else { return Ok(Carriage::default()) };
        let given = self.protocols().and_then(|p| p.get(protocol));
        let Some(figures) = given else {
            let available = self.protocols().map(|p| p.given().collect()).unwrap_or_default();
            return Err(ProtocolNotGiven { protocol, available });
        };
        Ok(Carriage {
            protocol: Some(protocol),
            base_ns: figures.base_ns,
            lane_ns_per_byte: figures.lane_gbps.map_or(0.0, |rate| 1.0 / rate),
            pe_ns_per_byte: figures.pe_gbps.map_or(0.0, |rate| 1.0 / rate),
            step_ns: LinkClass::ALL.map(|class| self.step_ns(class).get(protocol)),
        })
    }

    /// What the switch computes, if the system's switch (each node's) multicasts: `None` for a
    /// switch that only forwards, or a system without one.
    pub fn multicast_switch(&self) -> Option<SwitchSpec> {
        self.spec.switch.filter(|switch| switch.multicast)
    }

    /// Whether one multicast object can span `members`: the system's switch multicasts, and every
    /// member hangs off the same switch by one link (its route to every other member is up to the
    /// switch and down from it), so one node's SIP leaders (cube 0, PE 0).
    ///
    /// # Errors
    /// [`MulticastError`] saying which of these fails, naming the member.
    pub fn check_multicast(&self, members: &[PeId]) -> Result<(), MulticastError> {
        if self.interconnect() != SipInterconnect::Switched {
            return Err(MulticastError::NotSwitched { interconnect: self.interconnect() });
        }
        if self.multicast_switch().is_none() {
            return Err(MulticastError::NoMulticast { given: self.spec.switch.is_some() });
        }
        let Some(&first) = members.first() else { return Ok(()) };
        for &member in members {
            if !self.contains(member) || member.cube != 0 || member.pe != 0 {
                return Err(MulticastError::OffSwitch { member, system: self.describe() });
            }
            if self.node_of(member.sip) != self.node_of(first.sip) {
                return Err(MulticastError::AcrossNodes {
                    first,
                    member,
                    first_node: self.node_of(first.sip),
                    node: self.node_of(member.sip),
                });
            }
        }
        Ok(())
    }

    /// The mesh position of a cube index, row-major: `cube = y * w + x`.
    ///
    /// The index is not checked against the mesh: a cube past the last row gets a `y` of `h` or more.
    pub fn cube_coord(&self, cube: u32) -> CubeCoord {
        // `w` fits u32 because the system has at most 2^24 PEs (System::MAX_PES).
        let w = self.spec.mesh.w as u32;
        CubeCoord { x: cube % w, y: cube / w }
    }

    /// The cube index at a mesh position: `y * w + x`.
    pub fn cube_index(&self, coord: CubeCoord) -> u32 {
        coord.y * self.spec.mesh.w as u32 + coord.x
    }

    /// Every PE, in `PeId` order (SIP-major, then cube, then PE).
    pub fn all_pes(&self) -> impl Iterator<Item = PeId> + '_ {
        let (sips, cubes, pes) = self.extents();
        (0..sips).flat_map(move |sip| (0..cubes).flat_map(move |cube| (0..pes).map(move |pe| PeId::new(sip, cube, pe))))
    }

    /// Whether the PE exists in this system.
    pub fn contains(&self, pe: PeId) -> bool {
        let (sips, cubes, pes) = self.extents();
        pe.sip < sips && pe.cube < cubes && pe.pe < pes
    }

    /// The PE's place in [`System::all_pes`] (`0..total_pes`), or `None` when the system has no such PE.
    pub fn pe_index(&self, pe: PeId) -> Option<usize> {
        self.contains(pe)
            .then(|| (pe.sip as usize * self.cubes_per_sip() + pe.cube as usize) * self.pes_per_cube() + pe.pe as usize)
    }

    /// A short description of the shape, for messages: `2 SIPs x 1x2 cubes x 4 PEs`, or with several
    /// nodes `2 nodes x 4 SIPs x 1x2 cubes x 4 PEs` (`sips_per_node` SIPs in each node).
    pub fn describe(&self) -> String {
        let (w, h) = self.mesh();
        let sips = match self.nodes() {
            1 => format!("{} SIPs", self.sips()),
            nodes => format!("{nodes} nodes x {} SIPs", self.sips_per_node()),
        };
        format!("{sips} x {w}x{h} cubes x {} PEs", self.pes_per_cube())
    }

    /// `(sips, cubes_per_sip, pes_per_cube)` as `u32`, the type of [`PeId`]'s fields.
    pub(crate) fn extents(&self) -> (u32, u32, u32) {
        // All three fit u32: their product is at most 2^24 (System::MAX_PES) and each is at least 1.
        (self.sips() as u32, self.cubes_per_sip() as u32, self.pes_per_cube() as u32)
    }
}

fn check_rate(field: fmt::Arguments<'_>, value: f64) -> Result<(), SpecError> {
    if value.is_finite() && value >= System::MIN_RATE {
        Ok(())
    } else {
        Err(SpecError::BadRate { field: field.to_string(), value })
    }
}

fn check_time(field: fmt::Arguments<'_>, value: f64) -> Result<(), SpecError> {
    if (0.0..=System::MAX_TIME_NS).contains(&value) {
        Ok(())
    } else {
        Err(SpecError::BadTime { field: field.to_string(), value })
    }
}
