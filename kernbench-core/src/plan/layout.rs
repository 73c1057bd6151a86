//! Distributed tensors: how each SIP's `rows x cols` tensor is split over its cubes and PEs.
//!
//! A [`DpPolicy`] splits a SIP's tensor twice: first over the cubes of the SIP, then each cube's part
//! over the cube's PEs. Each split is one [`Split`]; a part is always a rectangle of the SIP's tensor,
//! and a PE's shard holds its rectangle row-major, made contiguous. Row-wise and column-wise parts
//! follow [`chunk_range`]: the first `len % count` parts are one row (column) larger. Every PE the
//! policy places a part on holds a shard, even an empty one, so which PEs hold data depends only on
//! the policy and the system, never on the tensor's size.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::machine::{PeId, System};
use crate::tile::{Dtype, Tile, TileError, chunk_range};

/// How one level (cubes of a SIP, or PEs of a cube) shares the part it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Only index 0 (cube 0, or PE 0 of the cube) holds the whole part; the others hold nothing.
    Leader,
    /// Index `i` holds row chunk `i` of the part.
    RowWise,
    /// Index `i` holds column chunk `i` of the part.
    ColumnWise,
    /// Every index holds the whole part.
    Replicated,
}

impl Split {
    /// The name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Split::Leader => "leader",
            Split::RowWise => "row_wise",
            Split::ColumnWise => "column_wise",
            Split::Replicated => "replicated",
        }
    }

    /// Every split.
    pub const ALL: [Split; 4] = [Split::Leader, Split::RowWise, Split::ColumnWise, Split::Replicated];

    /// The part index `index` of `count` holds, or `None` when it holds nothing.
    fn part(self, block: &Block, index: usize, count: usize) -> Result<Option<Block>, TileError> {
        let offset = |range: Range<usize>, by: usize| range.start + by..range.end + by;
        Ok(match self {
            Split::Leader => (index == 0).then(|| block.clone()),
            Split::Replicated => Some(block.clone()),
            Split::RowWise => Some(Block {
                rows: offset(chunk_range(block.rows.len(), index, count)?, block.rows.start),
                cols: block.cols.clone(),
            }),
            Split::ColumnWise => Some(Block {
                rows: block.rows.clone(),
                cols: offset(chunk_range(block.cols.len(), index, count)?, block.cols.start),
            }),
        })
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a SIP's tensor is spread over its SIP: split over cubes, then each cube's part over its PEs.
///
/// Every part is a rectangle of the SIP's tensor; a PE's shard holds its rectangle row-major, made
/// contiguous. Row-wise and column-wise parts follow [`chunk_range`]: the first `len % count` parts
/// are one row (column) larger. Every PE the policy places a part on holds a shard, even an empty one,
/// so which PEs hold data depends only on the policy and the system, never on the tensor's size.
///
/// # Examples
/// ```
/// use kernbench_core::{DpPolicy, Split};
/// let policy: DpPolicy = serde_json::from_str(r#"{"cube": "column_wise", "pe": "column_wise"}"#).unwrap();
/// assert_eq!(policy, DpPolicy::new(Split::ColumnWise, Split::ColumnWise));
/// assert_eq!(DpPolicy::LEADER.to_string(), "cube leader, pe leader");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpPolicy {
    /// How the cubes of a SIP share the SIP's tensor.
    pub cube: Split,
    /// How the PEs of a cube share the cube's part.
    pub pe: Split,
}

impl DpPolicy {
    /// The whole SIP tensor on (cube 0, PE 0): one shard per SIP (the layout of `leader_only`).
    pub const LEADER: DpPolicy = DpPolicy { cube: Split::Leader, pe: Split::Leader };

    /// An equal column block on every cube's PE 0 (the layout of `cube_leaders`).
    pub const CUBE_LEADERS: DpPolicy = DpPolicy { cube: Split::ColumnWise, pe: Split::Leader };

    /// An equal column block on every PE of the SIP (the layout of `all_pes`: `multi_pe_sip_local`).
    pub const EVERY_PE: DpPolicy = DpPolicy { cube: Split::ColumnWise, pe: Split::ColumnWise };

    /// A policy from its two splits.
    pub const fn new(cube: Split, pe: Split) -> DpPolicy {
        DpPolicy { cube, pe }
    }
}

impl fmt::Display for DpPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cube {}, pe {}", self.cube, self.pe)
    }
}

/// Whether a SIP's data sits on one PE or several: what registry selection rules distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutKind {
    /// Each SIP's tensor is one shard on one PE.
    OnePe,
    /// Some SIP's tensor is held by several PEs.
    MultiPe,
}

impl LayoutKind {
    /// The name used in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            LayoutKind::OnePe => "one_pe",
            LayoutKind::MultiPe => "multi_pe",
        }
    }
}

impl fmt::Display for LayoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a distributed tensor's data is: its dtype, the SIP tensor's shape, and how many elements each PE
/// holds. This is what validators check against an install plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The element type.
    pub dtype: Dtype,
    /// Rows of each SIP's tensor.
    pub rows: usize,
    /// Columns of each SIP's tensor.
    pub cols: usize,
    /// Elements held per PE; a PE not listed holds no shard.
    pub shards: BTreeMap<PeId, usize>,
}

impl Layout {
    /// The layout a tensor of `rows x cols` elements of `dtype` per SIP has once spread over `system`
    /// as `policy` says ([`DistTensor::distribute`]), without any data: what a call can be prepared for
    /// before its tensor exists.
    ///
    /// # Errors
    /// [`LayoutError::ShapeOverflow`], and a split of the tensor the policy cannot make.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Dtype, DpPolicy, Layout, LayoutKind, System};
    /// let system = System::shape(2, 1, 1, 4).unwrap();
    /// let layout = Layout::of(&system, Dtype::F32, 1, 64, DpPolicy::EVERY_PE).unwrap();
    /// assert_eq!((layout.shards.len(), layout.kind()), (8, LayoutKind::MultiPe));
    /// assert!(layout.shards.values().all(|&elements| elements == 16));
    /// ```
    pub fn of(
        system: &System,
        dtype: Dtype,
        rows: usize,
        cols: usize,
        policy: DpPolicy,
    ) -> Result<Layout, LayoutError> {
        let (sips, cubes, pes) = system.extents();
        sip_len(rows, cols)?;
        let parts = Placement::Policy { policy, sips, cubes, pes }.parts(rows, cols)?;
        let shards = (0..sips)
            .flat_map(|sip| parts.iter().map(move |(cube, pe, block)| (PeId::new(sip, *cube, *pe), block.len())))
            .collect();
        Ok(Layout { dtype, rows, cols, shards })
    }

    /// The elements each of `pes` holds, `None` for a PE without a shard, in their order: found by a
    /// walk along the shards while `pes` ascend (as a plan lists its participants), a lookup for one
    /// out of order.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Dtype, DpPolicy, Layout, PeId, System};
    /// let system = System::shape(2, 1, 1, 2).unwrap();
    /// let layout = Layout::of(&system, Dtype::F32, 1, 8, DpPolicy::LEADER).unwrap();
    /// let pes = [PeId::new(0, 0, 0), PeId::new(0, 0, 1), PeId::new(1, 0, 0), PeId::new(0, 0, 0)];
    /// assert_eq!(layout.elements_of(pes.into_iter()).collect::<Vec<_>>(), [Some(8), None, Some(8), Some(8)]);
    /// ```
    pub fn elements_of(&self, pes: impl Iterator<Item = PeId>) -> impl Iterator<Item = Option<usize>> {
        along(&self.shards, pes).map(|elements| elements.copied())
    }

    /// Elements of one SIP's whole tensor: `rows * cols`.
    pub fn sip_elements(&self) -> usize {
        self.rows.saturating_mul(self.cols)
    }

    /// One PE per SIP or several.
    pub fn kind(&self) -> LayoutKind {
        let shards_per_sip = self.shards.keys().fold(BTreeMap::<u32, usize>::new(), |mut counts, pe| {
            *counts.entry(pe.sip).or_default() += 1;
            counts
        });
        if shards_per_sip.values().all(|&n| n <= 1) { LayoutKind::OnePe } else { LayoutKind::MultiPe }
    }
}

/// Why a tensor could not be distributed, built or gathered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// `distribute` needs one tile per SIP.
    #[error("got {got} SIP tiles for a system of {expected} SIPs: expected one tile per SIP")]
    TileCount {
        /// SIPs in the system.
        expected: usize,
        /// Tiles given.
        got: usize,
    },
    /// A SIP tile whose length is not `rows * cols`.
    #[error("the tile of SIP {sip} holds {got} elements: expected rows x cols = {rows} x {cols} = {}", rows * cols)]
    TileLength {
        /// The SIP.
        sip: u32,
        /// Its tile's length.
        got: usize,
        /// Rows of the SIP tensor.
        rows: usize,
        /// Columns of the SIP tensor.
        cols: usize,
    },
    /// Tiles of different dtypes in one tensor.
    #[error("{what} holds {got}: expected {expected}, the tensor's dtype")]
    DtypeMismatch {
        /// The tile: `the tile of SIP 1` or `the shard on (sip 0, cube 1, pe 0)`.
        what: String,
        /// The tensor's dtype.
        expected: Dtype,
        /// The tile's dtype.
        got: Dtype,
    },
    /// `rows * cols` does not fit a `usize`.
    #[error("a {rows} x {cols} SIP tensor has more elements than a usize can count")]
    ShapeOverflow {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
    },
    /// A tensor larger than a run may allocate.
    #[error("a tensor of {bytes} bytes in all is too large: expected at most {limit} bytes (the limit of one run)")]
    TooLarge {
        /// The bytes asked for, over every SIP (saturated at `u64::MAX`).
        bytes: u64,
        /// The most a tensor may hold: [`DistTensor::MAX_BYTES`].
        limit: u64,
    },
    /// A SIP the tensor does not span.
    #[error("SIP {sip} does not exist: the tensor spans SIPs 0..{sips}")]
    NoSuchSip {
        /// The SIP asked for.
        sip: u32,
        /// SIPs the tensor spans.
        sips: u32,
    },
    /// A PE that the policy gives a part holds no shard.
    #[error("{pe} holds no shard, but policy ({policy}) places {expected} elements there")]
    MissingShard {
        /// The PE.
        pe: PeId,
        /// The tensor's policy.
        policy: DpPolicy,
        /// Elements of its part.
        expected: usize,
    },
    /// A PE that the policy gives nothing holds a shard.
    #[error("{pe} holds a shard of {got} elements, but policy ({policy}) places nothing there")]
    UnexpectedShard {
        /// The PE.
        pe: PeId,
        /// The tensor's policy.
        policy: DpPolicy,
        /// Elements it holds.
        got: usize,
    },
    /// A shard of another size than its part.
    #[error("{pe} holds {got} elements: expected {expected}, the size of its part")]
    ShardLength {
        /// The PE.
        pe: PeId,
        /// Elements it holds.
        got: usize,
        /// Elements of its part.
        expected: usize,
    },
    /// Two PEs hold the same part with different contents.
    #[error("{pe}'s copy of its part differs from {reference}'s: replicated parts must be bit-identical")]
    ReplicaMismatch {
        /// The PE whose copy differs.
        pe: PeId,
        /// The first PE holding the part.
        reference: PeId,
    },
    /// The shards of a SIP built with [`DistTensor::from_shards`] do not add up to its tensor.
    #[error("the shards of SIP {sip} hold {got} elements in total: expected rows x cols = {expected}")]
    RankLength {
        /// The SIP.
        sip: u32,
        /// Elements its shards hold.
        got: usize,
        /// `rows * cols`.
        expected: usize,
    },
    /// Slicing or writing a tile failed.
    #[error(transparent)]
    Tile(#[from] TileError),
}

/// A rectangle of a SIP's tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Block {
    rows: Range<usize>,
    cols: Range<usize>,
}

impl Block {
    fn len(&self) -> usize {
        self.rows.len() * self.cols.len()
    }
}

/// Where a tensor's shards came from, which decides how a SIP's tensor is gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Placement {
    /// Parts placed by a policy on a system of `sips x cubes x pes`.
    Policy { policy: DpPolicy, sips: u32, cubes: u32, pes: u32 },
    /// Shards given as they are; a SIP's tensor is its shards concatenated in `PeId` order.
    Explicit,
}

impl Placement {
    /// Every `(cube, pe, part)` of one SIP, in `PeId` order: the same for every SIP.
    fn parts(&self, rows: usize, cols: usize) -> Result<Vec<(u32, u32, Block)>, TileError> {
        let Placement::Policy { policy, cubes, pes, .. } = *self else {
            return Ok(Vec::new());
        };
        let whole = Block { rows: 0..rows, cols: 0..cols };
        let mut parts = Vec::new();
        for cube in 0..cubes {
            let Some(cube_part) = policy.cube.part(&whole, cube as usize, cubes as usize)? else {
                continue;
            };
            for pe in 0..pes {
                if let Some(part) = policy.pe.part(&cube_part, pe as usize, pes as usize)? {
                    parts.push((cube, pe, part));
                }
            }
        }
        Ok(parts)
    }
}

/// A tensor of `rows x cols` per SIP, held as shards on the PEs of every SIP.
///
/// # Examples
/// ```
/// use kernbench_core::{DistTensor, DpPolicy, Split, System, Tile, PeId};
/// let system = System::shape(2, 2, 1, 2).unwrap(); // 2 SIPs x 2 cubes x 2 PEs
/// let sips: Vec<Tile> = (0..2).map(|r| Tile::from_vec((0..8).map(|v| (v + 10 * r) as f32).collect())).collect();
/// let t = DistTensor::distribute(&system, &sips, 2, 4, DpPolicy::new(Split::RowWise, Split::ColumnWise)).unwrap();
/// // Cube 1 holds row 1; its PE 1 holds columns 2..4 of it.
/// assert_eq!(t.shard(PeId::new(1, 1, 1)).unwrap().to_vec::<f32>().unwrap(), vec![16.0, 17.0]);
/// assert!(t.gather_sip(1).unwrap().bit_eq(&sips[1]));
/// ```
#[derive(Clone, Debug)]
pub struct DistTensor {
    dtype: Dtype,
    rows: usize,
    cols: usize,
    shards: BTreeMap<PeId, Tile>,
    placement: Placement,
}

fn sip_len(rows: usize, cols: usize) -> Result<usize, LayoutError> {
    rows.checked_mul(cols).ok_or(LayoutError::ShapeOverflow { rows, cols })
}

fn check_dtype(expected: Dtype, got: Dtype, what: impl FnOnce() -> String) -> Result<(), LayoutError> {
    if expected == got { Ok(()) } else { Err(LayoutError::DtypeMismatch { what: what(), expected, got }) }
}

/// The entry of `map` for each of `pes`: a walk along the map while `pes` ascend, so a million PEs
/// in order cost one pass rather than a descent of the tree each; a PE below one already asked for
/// is looked up.
fn along<V>(map: &BTreeMap<PeId, V>, pes: impl Iterator<Item = PeId>) -> impl Iterator<Item = Option<&V>> {
    let (mut entries, mut highest) = (map.iter().peekable(), None);
    pes.map(move |pe| {
        if highest.is_some_and(|highest| pe < highest) {
            return map.get(&pe);
        }
        highest = Some(pe);
        while entries.next_if(|&(&at, _)| at < pe).is_some() {}
        entries.peek().filter(|&&(&at, _)| at == pe).map(|&(_, value)| value)
    })
}

/// The part `block` of a row-major SIP tile with `cols` columns, contiguous; shares the tile's buffer
/// when the part is already contiguous in it.
fn cut(tile: &Tile, cols: usize, block: &Block) -> Result<Tile, TileError> {
    let width = block.cols.len();
    if block.len() == 0 {
        return tile.slice(0..0);
    }
    if width == cols || block.rows.len() == 1 {
        let start = block.rows.start * cols + block.cols.start;
        return tile.slice(start..start + block.len());
    }
    let rows: Vec<Tile> = block
        .rows
        .clone()
        .map(|r| tile.slice(r * cols + block.cols.start..r * cols + block.cols.end))
        .collect::<Result<_, _>>()?;
    Tile::concat(&rows)
}

/// Writes a contiguous `shard` of part `block` back into a row-major SIP tile.
fn paste(out: &mut Tile, cols: usize, block: &Block, shard: &Tile) -> Result<(), TileError> {
    let width = block.cols.len();
    if width == cols {
        return out.write_at(block.rows.start * cols, shard);
    }
    for (i, r) in block.rows.clone().enumerate() {
        out.write_at(r * cols + block.cols.start, &shard.slice(i * width..(i + 1) * width)?)?;
    }
    Ok(())
}

impl DistTensor {
    /// The most bytes a tensor may hold over all SIPs, so that a mistyped size is an error rather than
    /// an allocation the machine cannot make.
    pub const MAX_BYTES: u64 = 1 << 36;

    /// Checks that `bytes` (over all SIPs) fit [`DistTensor::MAX_BYTES`].
    ///
    /// # Errors
    /// [`LayoutError::TooLarge`].
    pub fn check_size(bytes: u64) -> Result<(), LayoutError> {
        if bytes > Self::MAX_BYTES { Err(LayoutError::TooLarge { bytes, limit: Self::MAX_BYTES }) } else { Ok(()) }
    }

    /// Spreads one `rows x cols` row-major tile per SIP over the PEs of `system` as `policy` says.
    ///
    /// # Errors
    /// [`LayoutError::TileCount`] unless there is one tile per SIP, [`LayoutError::TileLength`] for a
    /// tile that is not `rows * cols` long, [`LayoutError::DtypeMismatch`] for mixed dtypes,
    /// [`LayoutError::ShapeOverflow`].
    pub fn distribute(
        system: &System,
        tiles: &[Tile],
        rows: usize,
        cols: usize,
        policy: DpPolicy,
    ) -> Result<DistTensor, LayoutError> {
        let (sips, cubes, pes) = system.extents();
        if tiles.len() != system.sips() {
            return Err(LayoutError::TileCount { expected: system.sips(), got: tiles.len() });
        }
        let len = sip_len(rows, cols)?;
        let dtype = tiles[0].dtype();
        for (sip, tile) in (0u32..).zip(tiles) {
            check_dtype(dtype, tile.dtype(), || format!("the tile of SIP {sip}"))?;
            if tile.len() != len {
                return Err(LayoutError::TileLength { sip, got: tile.len(), rows, cols });
            }
        }
        let placement = Placement::Policy { policy, sips, cubes, pes };
        let parts = placement.parts(rows, cols)?;
        // Collected, not inserted one by one: a map built from a list in order is built in one pass.
        let shards = (0u32..).zip(tiles).flat_map(|(sip, tile)| {
            parts.iter().map(move |(cube, pe, block)| Ok((PeId::new(sip, *cube, *pe), cut(tile, cols, block)?)))
        });
        let shards = shards.collect::<Result<BTreeMap<_, _>, LayoutError>>()?;
        Ok(DistTensor { dtype, rows, cols, shards, placement })
    }

    /// A tensor from shards as they are (for example a runtime's per-PE outputs). Without a policy,
    /// a SIP's tensor is gathered as its shards concatenated in `PeId` order.
    ///
    /// # Errors
    /// [`LayoutError::DtypeMismatch`] for a shard of another dtype, [`LayoutError::ShapeOverflow`].
    pub fn from_shards(
        dtype: Dtype,
        rows: usize,
        cols: usize,
        shards: BTreeMap<PeId, Tile>,
    ) -> Result<DistTensor, LayoutError> {
        sip_len(rows, cols)?;
        for (pe, shard) in &shards {
            check_dtype(dtype, shard.dtype(), || format!("the shard on {pe}"))?;
        }
        Ok(DistTensor { dtype, rows, cols, shards, placement: Placement::Explicit })
    }

    /// A tensor laid out like this one (same shape and policy) holding `shards` instead: a collective's
    /// outputs, for instance, so they gather the way the inputs were distributed.
    ///
    /// # Errors
    /// [`LayoutError::DtypeMismatch`]; for a distributed tensor also [`LayoutError::MissingShard`],
    /// [`LayoutError::UnexpectedShard`] or [`LayoutError::ShardLength`] when the shards do not sit on
    /// the policy's parts.
    pub fn with_shards(&self, shards: BTreeMap<PeId, Tile>) -> Result<DistTensor, LayoutError> {
        for (pe, shard) in &shards {
            check_dtype(self.dtype, shard.dtype(), || format!("the shard on {pe}"))?;
        }
        if let Placement::Policy { policy, sips, .. } = self.placement {
            let parts = self.placement.parts(self.rows, self.cols)?;
            // The parts' PEs and lengths in `PeId` order, as the shards are: one walk along both
            // finds the first shard out of place (in the shards' order) and the first part without one.
            let mut expected = (0..sips)
                .flat_map(|sip| parts.iter().map(move |(cube, pe, block)| (PeId::new(sip, *cube, *pe), block.len())))
                .peekable();
            let mut missing = None;
            for (&pe, shard) in &shards {
                while let Some(skipped) = expected.next_if(|&(next, _)| next < pe) {
                    missing = missing.or(Some(skipped));
                }
                match expected.next_if(|&(next, _)| next == pe) {
                    None => return Err(LayoutError::UnexpectedShard { pe, policy, got: shard.len() }),
                    Some((_, len)) if len != shard.len() => {
                        return Err(LayoutError::ShardLength { pe, got: shard.len(), expected: len });
                    }
                    Some(_) => {}
                }
            }
            if let Some((pe, len)) = missing.or_else(|| expected.next()) {
                return Err(LayoutError::MissingShard { pe, policy, expected: len });
            }
        }
        Ok(DistTensor { shards, ..self.clone_shape() })
    }

    fn clone_shape(&self) -> DistTensor {
        DistTensor {
            dtype: self.dtype,
            rows: self.rows,
            cols: self.cols,
            shards: BTreeMap::new(),
            placement: self.placement.clone(),
        }
    }

    /// Rebuilds SIP `sip`'s `rows x cols` tensor from its shards: the inverse of
    /// [`DistTensor::distribute`]. Parts held by several PEs must agree bit for bit.
    ///
    /// # Errors
    /// [`LayoutError::NoSuchSip`], [`LayoutError::MissingShard`], [`LayoutError::ShardLength`],
    /// [`LayoutError::ReplicaMismatch`]; for a tensor built from shards, [`LayoutError::RankLength`].
    pub fn gather_sip(&self, sip: u32) -> Result<Tile, LayoutError> {
        let len = sip_len(self.rows, self.cols)?;
        let Placement::Policy { policy, sips, .. } = self.placement else {
            let own: Vec<Tile> = self
                .shards
                .range(PeId::new(sip, 0, 0)..=PeId::new(sip, u32::MAX, u32::MAX))
                .map(|(_, t)| t.clone())
                .collect();
            let got = own.iter().map(Tile::len).sum();
            if got != len {
                return Err(LayoutError::RankLength { sip, got, expected: len });
            }
            return Ok(if own.is_empty() { Tile::zeros(self.dtype, 0) } else { Tile::concat(&own)? });
        };
        if sip >= sips {
            return Err(LayoutError::NoSuchSip { sip, sips });
        }
        let mut out = Tile::zeros(self.dtype, len);
        let mut first_holder: HashMap<Block, (PeId, &Tile)> = HashMap::new();
        for (cube, pe, block) in self.placement.parts(self.rows, self.cols)? {
            let pe = PeId::new(sip, cube, pe);
            let shard = self.shards.get(&pe).ok_or(LayoutError::MissingShard { pe, policy, expected: block.len() })?;
            if shard.len() != block.len() {
                return Err(LayoutError::ShardLength { pe, got: shard.len(), expected: block.len() });
            }
            match first_holder.get(&block) {
                Some(&(reference, copy)) if !copy.bit_eq(shard) => {
                    return Err(LayoutError::ReplicaMismatch { pe, reference });
                }
                Some(_) => {}
                None => {
                    paste(&mut out, self.cols, &block, shard)?;
                    first_holder.insert(block, (pe, shard));
                }
            }
        }
        Ok(out)
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Each SIP tensor's shape, `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The policy the tensor was distributed with; `None` for one built from shards.
    pub fn policy(&self) -> Option<DpPolicy> {
        match self.placement {
            Placement::Policy { policy, .. } => Some(policy),
            Placement::Explicit => None,
        }
    }

    /// Every shard, by PE.
    pub fn shards(&self) -> &BTreeMap<PeId, Tile> {
        &self.shards
    }

    /// The shard on `pe`, if it holds one.
    pub fn shard(&self, pe: PeId) -> Option<&Tile> {
        self.shards.get(&pe)
    }

    /// The shard on each of `pes`, `None` for a PE without one, in their order: [`DistTensor::shard`]
    /// of each, found by a walk along the shards while `pes` ascend (as a plan lists its
    /// participants), a lookup for one out of order.
    pub fn shards_of(&self, pes: impl Iterator<Item = PeId>) -> impl Iterator<Item = Option<&Tile>> {
        along(&self.shards, pes)
    }

    /// The shards, by PE, taken out of the tensor.
    pub fn into_shards(self) -> BTreeMap<PeId, Tile> {
        self.shards
    }

    /// Where the data is: dtype, SIP tensor shape and elements per PE.
    pub fn layout(&self) -> Layout {
        Layout {
            dtype: self.dtype,
            rows: self.rows,
            cols: self.cols,
            shards: self.shards.iter().map(|(&pe, t)| (pe, t.len())).collect(),
        }
    }
}
