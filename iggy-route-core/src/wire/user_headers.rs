//! User-header (and options) TLV blocks (§2), and [`UserHeaders`], the typed map a message's
//! block holds.
//!
//! The SDK keeps its headers in a sorted map and writes them in the map's order; keys order
//! by kind code, then bytes, in both, so the same headers make the same block byte for byte
//! on either client.

use std::collections::BTreeMap;
use std::collections::btree_map;

use bytes::{Bytes, BytesMut};

use super::{HeaderError, HeaderKey, HeaderValue, Reader, WireError};

/// Check a user-headers block: `[kind:u8 != 0][len:u32 1..=255][bytes]` entries, an
/// even number of them (key, value pairs). Returns the number of pairs.
pub fn validate_user_headers(buf: &[u8]) -> Result<u32, WireError> {
    let mut r = Reader::new(buf);
    let mut entries: u32 = 0;
    while r.remaining() > 0 {
        let kind = r.u8()?;
        if kind == 0 {
            return Err(WireError::InvalidValue {
                field: "user header kind",
                value: 0,
            });
        }
        let len = r.u32()? as usize;
        if !(1..=255).contains(&len) {
            return Err(WireError::InvalidLength {
                field: "user header field",
                len,
            });
        }
        r.bytes(len)?;
        entries = entries.saturating_add(1);
    }
    if !entries.is_multiple_of(2) {
        return Err(WireError::InvalidLength {
            field: "user header entries",
            len: entries as usize,
        });
    }
    Ok(entries / 2)
}

/// A message's user headers: a map from [`HeaderKey`] to [`HeaderValue`], sorted as the SDK
/// 0.11.0 sorts its `UserHeaders`, so that [`UserHeaders::encode`] writes the block the SDK
/// writes for the same headers and [`UserHeaders::decode`] reads the SDK's blocks.
///
/// ```
/// use iggy_route_core::wire::{HeaderKey, HeaderValue, Message, UserHeaders};
///
/// let mut headers = UserHeaders::new();
/// headers.insert(HeaderKey::try_from("content-type")?, HeaderValue::try_from("text/plain")?);
/// headers.insert(HeaderKey::try_from("attempt")?, HeaderValue::from(3u32));
/// let message = Message::new("hello").with_headers(&headers);
///
/// let read = message.headers()?;
/// assert_eq!(read.get_named("attempt").map(HeaderValue::as_u32), Some(Ok(3)));
/// # Ok::<(), iggy_route_core::wire::HeaderError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserHeaders(BTreeMap<HeaderKey, HeaderValue>);

impl UserHeaders {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: HeaderKey, value: HeaderValue) -> Option<HeaderValue> {
        self.0.insert(key, value)
    }

    /// The value of `key`.
    pub fn get(&self, key: &HeaderKey) -> Option<&HeaderValue> {
        self.0.get(key)
    }

    /// The value of the `String` key `name`, the kind a key made from `&str` has: the
    /// usual lookup, without making the key first.
    pub fn get_named(&self, name: &str) -> Option<&HeaderValue> {
        HeaderKey::string(name)
            .ok()
            .and_then(|key| self.0.get(&key))
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &HeaderKey) -> Option<HeaderValue> {
        self.0.remove(key)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &HeaderKey) -> bool {
        self.0.contains_key(key)
    }

    /// How many headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The headers, in key order (the block's order).
    pub fn iter(&self) -> btree_map::Iter<'_, HeaderKey, HeaderValue> {
        self.0.iter()
    }

    /// The block's size in bytes: 10 bytes of kinds and lengths per header, and its bytes.
    pub fn encoded_len(&self) -> usize {
        self.0
            .iter()
            .map(|(key, value)| key.entry_len() + value.entry_len())
            .sum()
    }

    /// The block the SDK 0.11.0 writes for these headers: each key entry then its value
    /// entry, in key order; empty for no headers. The SDK's message builder stops at
    /// 100,000 bytes (about 190 headers of 255-byte keys and values); a send takes any
    /// block its frame can carry, as the SDK's `send_messages` and the server do.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        for (key, value) in &self.0 {
            key.encode_entry(&mut out);
            value.encode_entry(&mut out);
        }
        out.freeze()
    }

    /// Reads a block, as the SDK 0.11.0 does: every entry checked (kinds the protocol
    /// defines, lengths 1..=255, a number kind exactly its size, an even number of
    /// entries), a key set twice keeping its last value. An empty block is no headers.
    pub fn decode(block: &[u8]) -> Result<Self, HeaderError> {
        // The whole block's layout first, with the check the send path applies, so that
        // what decodes here is what a send accepts.
        validate_user_headers(block)?;
        let mut r = Reader::new(block);
        let mut headers = BTreeMap::new();
        while r.remaining() > 0 {
            let key = HeaderKey::decode_entry(&mut r)?;
            let value = HeaderValue::decode_entry(&mut r)?;
            headers.insert(key, value);
        }
        Ok(Self(headers))
    }
}

impl From<BTreeMap<HeaderKey, HeaderValue>> for UserHeaders {
    fn from(map: BTreeMap<HeaderKey, HeaderValue>) -> Self {
        Self(map)
    }
}

impl<const N: usize> From<[(HeaderKey, HeaderValue); N]> for UserHeaders {
    fn from(pairs: [(HeaderKey, HeaderValue); N]) -> Self {
        Self(BTreeMap::from(pairs))
    }
}

impl FromIterator<(HeaderKey, HeaderValue)> for UserHeaders {
    fn from_iter<I: IntoIterator<Item = (HeaderKey, HeaderValue)>>(pairs: I) -> Self {
        Self(pairs.into_iter().collect())
    }
}

impl Extend<(HeaderKey, HeaderValue)> for UserHeaders {
    fn extend<I: IntoIterator<Item = (HeaderKey, HeaderValue)>>(&mut self, pairs: I) {
        self.0.extend(pairs);
    }
}

impl IntoIterator for UserHeaders {
    type Item = (HeaderKey, HeaderValue);
    type IntoIter = btree_map::IntoIter<HeaderKey, HeaderValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a UserHeaders {
    type Item = (&'a HeaderKey, &'a HeaderValue);
    type IntoIter = btree_map::Iter<'a, HeaderKey, HeaderValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_headers_must_be_pairs_of_valid_entries() {
        let pair = [2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v'];
        assert_eq!(validate_user_headers(&pair), Ok(1));
        assert_eq!(validate_user_headers(&[]), Ok(0));
        assert!(validate_user_headers(&pair[..6]).is_err());
        assert!(validate_user_headers(&[0, 1, 0, 0, 0, b'k']).is_err());
        assert!(validate_user_headers(&[1, 2, 3]).is_err());
    }
}
