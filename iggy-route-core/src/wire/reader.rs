//! A bounds-checked little-endian cursor over a byte slice.

use super::WireError;
use super::primitives::Name;

/// A cursor that reads little-endian values and reports [`WireError::Truncated`]
/// instead of panicking when the input runs out.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Start reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Take the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.buf.get(self.pos..end)) {
            Some(slice) => {
                self.pos += n;
                Ok(slice)
            }
            None => Err(WireError::Truncated {
                offset: self.pos,
                need: n,
                have: self.remaining(),
            }),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let slice = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    /// Read a u8.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    /// Read a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.array().map(u16::from_le_bytes)
    }

    /// Read a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.array().map(u32::from_le_bytes)
    }

    /// Read a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        self.array().map(u64::from_le_bytes)
    }

    /// Read a little-endian u128.
    pub fn u128(&mut self) -> Result<u128, WireError> {
        self.array().map(u128::from_le_bytes)
    }

    /// Read a `WireName`: `[len:u8 (1..=255)][utf8]`.
    pub fn name(&mut self) -> Result<Name, WireError> {
        Name::decode(self)
    }

    /// Read a `[len:u32][utf8]` string (cluster roster fields).
    pub fn string_u32(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = self.u32()? as usize;
        let bytes = self.bytes(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| WireError::InvalidUtf8 { field })
    }

    /// Take everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        rest
    }

    /// Everything that is left, without consuming it.
    pub fn rest_view(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Succeed only if every byte was consumed.
    pub fn finish(&self, field: &'static str) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(WireError::TrailingBytes { field, count }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_values_in_order() {
        let buf = [1, 2, 0, 3, 0, 0, 0, 9];
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 3);
        assert_eq!(r.remaining(), 1);
        assert_eq!(
            r.finish("x"),
            Err(WireError::TrailingBytes {
                field: "x",
                count: 1
            })
        );
        assert_eq!(r.rest(), &[9]);
        assert!(r.finish("x").is_ok());
    }

    #[test]
    fn short_input_reports_truncation_without_consuming() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(
            r.u32(),
            Err(WireError::Truncated {
                offset: 0,
                need: 4,
                have: 3
            })
        );
        assert_eq!(r.position(), 0);
        assert!(r.bytes(usize::MAX).is_err());
    }
}
