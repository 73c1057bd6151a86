//! The bytes that cross between processes of a spread run: a writer and a reader of little-endian
//! fields, and the codec of tiles and symmetric buffers. Uses nothing of the crate but its errors.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kernbench_core::symmetric::Symmetric;
use kernbench_core::{Dtype, Tile};

use crate::error::ExchangeError;

/// Appends to a hand-over buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.bytes.extend_from_slice(v);
    }
}

/// Reads a hand-over buffer written by [`Writer`] in another process.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    from: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], from: usize) -> Self {
        Reader { bytes, from }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub(crate) fn malformed(&self, what: &'static str) -> ExchangeError {
        ExchangeError::Malformed { from: self.from, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ExchangeError> {
        if self.bytes.len() < n {
            return Err(self.malformed("it ends early"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ExchangeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ExchangeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ExchangeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    pub(crate) fn f64(&mut self) -> Result<f64, ExchangeError> {
        self.u64().map(f64::from_bits)
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ExchangeError> {
        let n = self.u64()?;
        self.take(usize::try_from(n).map_err(|_| self.malformed("a length too large"))?)
    }
}

pub(crate) fn write_tile(w: &mut Writer, tile: &Tile) {
    w.u8(dtype_code(tile.dtype()));
    if tile.has_data() {
        w.u8(1);
        w.u64(tile.bytes() as u64);
        tile.write_bytes(&mut w.bytes);
    } else {
        // A tile without data (a timing-only run's) is its dtype and length.
        w.u8(0);
        w.u64(tile.len() as u64);
    }
}

pub(crate) fn read_tile(r: &mut Reader<'_>) -> Result<Tile, ExchangeError> {
    let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a tile's dtype"))?;
    if r.u8()? == 0 {
        let len = usize::try_from(r.u64()?).map_err(|_| r.malformed("a tile's length"))?;
        return Ok(Tile::without_data(dtype, len));
    }
    Tile::from_bytes(dtype, r.bytes()?).ok_or_else(|| r.malformed("a tile's data"))
}

/// The tiles whose wire forms ([`write_tile`]) are `forms`, as [`read_tile`] reads each, but those of
/// at most [`SHARED_TILE_BYTES`] bytes with data viewing one buffer per dtype: process 0 of a spread
/// run reads every other process's PEs' outputs, and a million small outputs, a buffer each, would
/// cost it an allocation or two apiece beside their bytes.
pub(crate) fn read_tiles(forms: &[Vec<u8>], from: usize) -> Result<Vec<Tile>, ExchangeError> {
    /// A tile as read: its own, or where its elements are in its dtype's shared buffer.
    enum Read {
        Own(Tile),
        Shared { dtype: Dtype, start: usize, len: usize },
    }
    let mut shared: Vec<Vec<u8>> = vec![Vec::new(); Dtype::ALL.len()];
    let mut read = Vec::with_capacity(forms.len());
    for form in forms {
        let mut r = Reader::new(form, from);
        let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a tile's dtype"))?;
        if r.u8()? == 0 {
            let len = usize::try_from(r.u64()?).map_err(|_| r.malformed("a tile's length"))?;
            read.push(Read::Own(Tile::without_data(dtype, len)));
            continue;
        }
        let bytes = r.bytes()?;
        if bytes.len() > SHARED_TILE_BYTES || bytes.len() % dtype.size() != 0 {
            read.push(Read::Own(Tile::from_bytes(dtype, bytes).ok_or_else(|| r.malformed("a tile's data"))?));
            continue;
        }
        let buffer = &mut shared[usize::from(dtype_code(dtype))];
        read.push(Read::Shared { dtype, start: buffer.len() / dtype.size(), len: bytes.len() / dtype.size() });
        buffer.extend_from_slice(bytes);
    }
    let malformed = || ExchangeError::Malformed { from, what: "a tile's data" };
    // Each dtype's buffer, whole (every part of it was checked to hold whole elements).
    let buffers: Vec<Tile> = (Dtype::ALL.iter().zip(&shared))
        .map(|(&dtype, bytes)| Tile::from_bytes(dtype, bytes).ok_or_else(malformed))
        .collect::<Result<_, _>>()?;
    drop(shared);
    read.into_iter()
        .map(|tile| match tile {
            Read::Own(tile) => Ok(tile),
            Read::Shared { dtype, start, len } => {
                buffers[usize::from(dtype_code(dtype))].slice(start..start + len).map_err(|_| malformed())
            }
        })
        .collect()
}

/// The largest tile [`read_tiles`] reads into a buffer it shares with others: a view keeps its
/// whole buffer, so only small tiles share (a large one is its own allocation's worth anyway).
const SHARED_TILE_BYTES: usize = 4096;

pub(crate) fn write_buffer(w: &mut Writer, buffer: &Symmetric) {
    w.bytes(buffer.name.as_bytes());
    w.u8(dtype_code(buffer.dtype));
    w.u64(buffer.len as u64);
}

pub(crate) fn read_buffer(r: &mut Reader<'_>) -> Result<Symmetric, ExchangeError> {
    let name = std::str::from_utf8(r.bytes()?).map_err(|_| r.malformed("a buffer's name"))?;
    let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a buffer's dtype"))?;
    Ok(Symmetric { name: interned(name), dtype, len: r.u64()? as usize })
}

/// `name` as the `&'static str` a [`Symmetric`] holds: buffer names are a kernel's constants, so each
/// distinct name is kept once for the life of the process.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let known: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(known);
    known
}

fn dtype_code(dtype: Dtype) -> u8 {
    Dtype::ALL.iter().position(|&d| d == dtype).expect("every dtype is in Dtype::ALL") as u8
}

fn dtype_of(code: u8) -> Option<Dtype> {
    Dtype::ALL.get(code as usize).copied()
}

#[cfg(test)]
mod tests {
    use kernbench_core::{Dtype, Tile};

    use super::{SHARED_TILE_BYTES, Writer, dtype_code, read_tiles, write_tile};

    #[test]
    fn tiles_read_together_are_those_written_the_small_ones_of_a_dtype_sharing_a_buffer() {
        let large = SHARED_TILE_BYTES / 4 + 1;
        let written = [
            Tile::from_vec(vec![1.0f32, 2.0, 3.0]),
            Tile::from_vec(vec![7i64, -8]),
            Tile::without_data(Dtype::F32, 5),
            Tile::from_vec(vec![4.0f32]),
            Tile::from_vec(Vec::<f32>::new()),
            Tile::from_vec((0..large).map(|i| i as f32).collect()),
            Tile::from_vec(vec![5.0f32, 6.0]),
        ];
        let forms: Vec<Vec<u8>> = (written.iter())
            .map(|tile| {
                let mut w = Writer::default();
                write_tile(&mut w, tile);
                w.bytes
            })
            .collect();
        let read = read_tiles(&forms, 1).unwrap();
        assert_eq!(read.len(), written.len());
        for (read, written) in read.iter().zip(&written) {
            assert!(read.bit_eq(written), "{read:?} read back as {written:?}");
        }
        // The small f32 tiles share one buffer; the large one, the i64 one and the shape do not.
        assert!(read[0].shares_buffer_with(&read[3]) && read[0].shares_buffer_with(&read[6]));
        assert!(!read[0].shares_buffer_with(&read[5]) && !read[0].shares_buffer_with(&read[1]));
        assert!(!read[2].has_data());
    }

    #[test]
    fn a_tile_whose_bytes_are_not_whole_elements_is_malformed() {
        // An f32 tile with data, of three bytes.
        let mut w = Writer::default();
        w.u8(dtype_code(Dtype::F32));
        w.u8(1);
        w.bytes(&[1, 2, 3]);
        assert!(read_tiles(&[w.bytes], 2).is_err());
    }
}
