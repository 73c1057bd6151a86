//! Directions: the names a PE gives its neighbours in a topology.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A PE's name for one of its neighbours. Each direction of a PE has its own inbound and outbound IPCQ.
///
/// Every topology speaks this one vocabulary, so a kernel says `tl.send(E, &tile)` whatever the
/// topology, and an install plan can be checked for symmetry with [`Direction::pairs_with`].
///
/// # Examples
/// ```
/// use kernbench_core::Direction;
/// assert!(Direction::E.pairs_with(Direction::W));
/// assert!(Direction::Parent(0).pairs_with(Direction::Child(0, 1)));
/// assert_eq!("child1.0".parse::<Direction>().unwrap(), Direction::Child(1, 0));
/// assert_eq!(Direction::Dim(2).to_string(), "dim2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Direction {
    /// East: the next member of a ring or the next column of a mesh.
    E,
    /// West: the previous member of a ring or the previous column of a mesh.
    W,
    /// North: the next row of a mesh, or the next cube leader in a hierarchical topology.
    N,
    /// South: the previous row of a mesh, or the previous cube leader.
    S,
    /// The next SIP leader on the inter-SIP ring of a hierarchical topology.
    SipNext,
    /// The previous SIP leader on the inter-SIP ring of a hierarchical topology.
    SipPrev,
    /// The parent in tree `t` (binary tree: 0; double binary tree: 0 and 1).
    Parent(u8),
    /// Child `k` (0 = left, 1 = right) in tree `t`: `Child(t, k)`.
    Child(u8, u8),
    /// The partner across hypercube dimension `k` (recursive doubling); dimension `log2` of the largest
    /// power of two below the count links the extra members of a non-power-of-two count.
    Dim(u8),
    /// A direct peer, named by its index among the participants (the `full` topology).
    Peer(u32),
}

impl Direction {
    /// Whether a neighbour listed as `self` here may list us back as `other`: E/W, N/S,
    /// SipNext/SipPrev, Parent/Child of the same tree, Dim(k)/Dim(k), and Peer/Peer.
    pub fn pairs_with(self, other: Direction) -> bool {
        use Direction::*;
        match (self, other) {
            (E, W) | (W, E) | (N, S) | (S, N) | (SipNext, SipPrev) | (SipPrev, SipNext) => true,
            (Parent(t), Child(u, _)) | (Child(u, _), Parent(t)) => t == u,
            (Dim(a), Dim(b)) => a == b,
            (Peer(_), Peer(_)) => true,
            _ => false,
        }
    }
}

impl Direction {
    /// The direction of direct peer `index` (the `full` topology's link to that participant), from
    /// whatever integer type the kernel counts in.
    ///
    /// It returns a `Result` rather than panicking, because the index is computed at run time (often
    /// `rank + k` or `rank - k`): in a `#[ccl_kernel]`, `Direction::peer(j)?` turns an index that no
    /// direction can hold (negative, or above `u32::MAX`) into the PE's error. An index that fits but
    /// is not a neighbour is reported by the `tl.send` / `tl.recv` that uses it.
    ///
    /// # Errors
    /// [`PeerIndexError`] for an index outside `0..=u32::MAX`.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Direction;
    /// assert_eq!(Direction::peer(3usize), Ok(Direction::Peer(3)));
    /// assert_eq!(Direction::peer(7i32), Ok(Direction::Peer(7)));
    /// let error = Direction::peer(-1i32).unwrap_err();
    /// assert_eq!(error.to_string(), "peer index -1 is not a direction: expected 0..=4294967295");
    /// ```
    pub fn peer<I>(index: I) -> Result<Direction, PeerIndexError>
    where
        I: TryInto<u32> + Copy + fmt::Display,
    {
        index.try_into().map(Direction::Peer).map_err(|_| PeerIndexError { index: index.to_string() })
    }
}

/// A peer index that no [`Direction::Peer`] can hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("peer index {index} is not a direction: expected 0..={max}", max = u32::MAX)]
pub struct PeerIndexError {
    /// The index given, as written.
    pub index: String,
}

impl Direction {
    /// A number that identifies the direction, ordered as directions are: a cheap key for lookups in
    /// neighbour tables.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Direction;
    /// assert!(Direction::E.key() < Direction::W.key());
    /// assert_ne!(Direction::Child(0, 1).key(), Direction::Child(1, 0).key());
    /// ```
    pub const fn key(self) -> u64 {
        // The variant's index in the top byte, its fields below: the same order as the derived `Ord`.
        let (variant, fields) = match self {
            Direction::E => (0, 0),
            Direction::W => (1, 0),
            Direction::N => (2, 0),
            Direction::S => (3, 0),
            Direction::SipNext => (4, 0),
            Direction::SipPrev => (5, 0),
            Direction::Parent(t) => (6, (t as u64) << 8),
            Direction::Child(t, k) => (7, ((t as u64) << 8) | k as u64),
            Direction::Dim(k) => (8, k as u64),
            Direction::Peer(j) => (9, j as u64),
        };
        (variant << 56) | fields
    }

    /// The direction whose [`Direction::key`] is `key`; `None` for a number no direction has.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Direction;
    /// for direction in [Direction::SipPrev, Direction::Child(3, 1), Direction::Peer(70_000)] {
    ///     assert_eq!(Direction::from_key(direction.key()), Some(direction));
    /// }
    /// assert_eq!(Direction::from_key(10 << 56), None);
    /// assert_eq!(Direction::from_key(Direction::E.key() + 1), None, "E has no fields");
    /// ```
    pub const fn from_key(key: u64) -> Option<Direction> {
        let (variant, fields) = (key >> 56, key & ((1 << 56) - 1));
        let (byte, low) = ((fields >> 8) as u8, fields as u8);
        let direction = match variant {
            0 => Direction::E,
            1 => Direction::W,
            2 => Direction::N,
            3 => Direction::S,
            4 => Direction::SipNext,
            5 => Direction::SipPrev,
            6 => Direction::Parent(byte),
            7 => Direction::Child(byte, low),
            8 => Direction::Dim(low),
            9 if fields <= u32::MAX as u64 => Direction::Peer(fields as u32),
            _ => return None,
        };
        // A key with bits no field of its variant holds names none.
        if direction.key() == key { Some(direction) } else { None }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Direction::E => f.write_str("E"),
            Direction::W => f.write_str("W"),
            Direction::N => f.write_str("N"),
            Direction::S => f.write_str("S"),
            Direction::SipNext => f.write_str("sip_next"),
            Direction::SipPrev => f.write_str("sip_prev"),
            Direction::Parent(t) => write!(f, "parent{t}"),
            Direction::Child(t, k) => write!(f, "child{t}.{k}"),
            Direction::Dim(k) => write!(f, "dim{k}"),
            Direction::Peer(r) => write!(f, "peer{r}"),
        }
    }
}

/// A string that names no direction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown direction `{0}`: expected E, W, N, S, sip_next, sip_prev, parent<t>, child<t>.<k>, dim<k> or peer<i>")]
pub struct ParseDirectionError(pub String);

impl FromStr for Direction {
    type Err = ParseDirectionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseDirectionError(s.to_owned());
        let number = |rest: &str| rest.parse().map_err(|_| bad());
        Ok(match s {
            "E" => Direction::E,
            "W" => Direction::W,
            "N" => Direction::N,
            "S" => Direction::S,
            "sip_next" => Direction::SipNext,
            "sip_prev" => Direction::SipPrev,
            _ => {
                if let Some(rest) = s.strip_prefix("parent") {
                    Direction::Parent(number(rest)?)
                } else if let Some(rest) = s.strip_prefix("child") {
                    let (t, k) = rest.split_once('.').ok_or_else(bad)?;
                    Direction::Child(number(t)?, number(k)?)
                } else if let Some(rest) = s.strip_prefix("dim") {
                    Direction::Dim(number(rest)?)
                } else if let Some(rest) = s.strip_prefix("peer") {
                    Direction::Peer(rest.parse().map_err(|_| bad())?)
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

impl From<Direction> for String {
    fn from(d: Direction) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for Direction {
    type Error = ParseDirectionError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}
