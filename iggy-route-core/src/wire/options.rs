//! Options blocks (§2): the key-value TLV block that create and update requests carry
//! after their fixed fields, and the typed options of `UPDATE_TOPIC` (304).
//!
//! An options block reuses the user-headers encoding, `[kind:u8][len:u32][bytes]` for the
//! key then the same for the value, and adds the contract the 0.11.0 crate checks at the
//! wire edge: string keys only, valid UTF-8, no key twice, at most [`MAX_OPTIONS`] entries
//! and [`MAX_OPTIONS_BYTES`] bytes. Value kinds are not restricted, so a key a newer
//! client sends still passes the structural check (the server refuses it by name).

use bytes::{BufMut, Bytes, BytesMut};

use super::len_u32;
#[cfg(feature = "server")]
use super::{Reader, WireError, validate_user_headers};

/// Most entries one options block may hold (the crate's `MAX_OPTIONS`).
pub const MAX_OPTIONS: u32 = 1024;

/// Most bytes one options block may take (the crate's `MAX_OPTIONS_BYTES`).
pub const MAX_OPTIONS_BYTES: usize = 100_000;

/// Kind code of a UTF-8 string field.
const KIND_STRING: u8 = 2;
/// Kind code of a one-byte unsigned field (read as a compression code).
#[cfg(feature = "server")]
const KIND_UINT8: u8 = 9;
/// Kind code of an eight-byte unsigned field (little-endian).
const KIND_UINT64: u8 = 12;

/// The option keys `UPDATE_TOPIC` accepts, in the byte order the SDK writes them in (it
/// keeps its options in a sorted map).
pub mod topic_option_key {
    /// The compression algorithm, `none` or `gzip`.
    pub const COMPRESSION_ALGORITHM: &str = "compression_algorithm";
    /// The topic size cap in bytes (0 = server default, `u64::MAX` = unlimited).
    pub const MAX_TOPIC_SIZE: &str = "max_topic_size";
    /// The message expiry in µs (0 = server default, `u64::MAX` = never).
    pub const MESSAGE_EXPIRY: &str = "message_expiry";
}

/// One key-value pair of an options block, borrowed from the block.
#[cfg(feature = "server")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionEntry<'a> {
    /// The key (checked UTF-8).
    pub key: &'a str,
    /// The value's kind code.
    pub value_kind: u8,
    /// The value's bytes, as the kind lays them out.
    pub value: &'a [u8],
}

/// Check an options block against the crate's contract and return its entries in wire
/// order (server side: a client only writes blocks).
#[cfg(feature = "server")]
pub fn option_entries(block: &[u8]) -> Result<Vec<OptionEntry<'_>>, WireError> {
    if block.len() > MAX_OPTIONS_BYTES {
        return Err(WireError::InvalidLength {
            field: "options block",
            len: block.len(),
        });
    }
    let pairs = validate_user_headers(block)?;
    if pairs > MAX_OPTIONS {
        return Err(WireError::InvalidLength {
            field: "options entries",
            len: pairs as usize,
        });
    }
    // Bounded by the structural check above: `pairs` entries are present.
    let mut entries: Vec<OptionEntry<'_>> = Vec::with_capacity(pairs as usize);
    let mut r = Reader::new(block);
    while r.remaining() > 0 {
        let key_kind = r.u8()?;
        let key_len = r.u32()? as usize;
        let key = r.bytes(key_len)?;
        let value_kind = r.u8()?;
        let value_len = r.u32()? as usize;
        let value = r.bytes(value_len)?;
        if key_kind != KIND_STRING {
            return Err(WireError::InvalidValue {
                field: "option key kind",
                value: key_kind.into(),
            });
        }
        let key = std::str::from_utf8(key).map_err(|_| WireError::InvalidUtf8 {
            field: "option key",
        })?;
        if entries.iter().any(|entry| entry.key == key) {
            return Err(WireError::InvalidValue {
                field: "duplicate option key",
                value: entries.len() as u64,
            });
        }
        entries.push(OptionEntry {
            key,
            value_kind,
            value,
        });
    }
    Ok(entries)
}

/// Append one key-value entry (the key as a string, 1..=255 bytes: callers pass constants).
fn put_entry(out: &mut BytesMut, key: &str, value_kind: u8, value: &[u8]) {
    out.put_u8(KIND_STRING);
    out.put_u32_le(len_u32(key.len()));
    out.put_slice(key.as_bytes());
    out.put_u8(value_kind);
    out.put_u32_le(len_u32(value.len()));
    out.put_slice(value);
}

/// Encoded size of one entry.
fn entry_len(key: &str, value_len: usize) -> usize {
    1 + 4 + key.len() + 1 + 4 + value_len
}

/// A topic's compression algorithm, as its topic header (code) and the options (name)
/// carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CompressionAlgorithm {
    /// No compression (code 1).
    None = 1,
    /// Gzip (code 2).
    Gzip = 2,
}

impl CompressionAlgorithm {
    /// The name the options block carries.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
        }
    }

    /// The algorithm with this code (1 or 2).
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::None),
            2 => Some(Self::Gzip),
            _ => None,
        }
    }

    /// The algorithm with this name, case-insensitively, as the server parses it.
    pub fn from_name(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("none") {
            Some(Self::None)
        } else if name.eq_ignore_ascii_case("gzip") {
            Some(Self::Gzip)
        } else {
            None
        }
    }
}

#[cfg(feature = "server")]
/// Why an `UPDATE_TOPIC` options block was refused, as the server tells the cases apart
/// (`UnsupportedOptionKey` 4041, `InvalidOptionValue` 4042, a malformed block).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicOptionsError {
    /// The block breaks the options contract.
    #[error("malformed options block: {0}")]
    Malformed(#[from] WireError),
    /// A key that an update may not carry.
    #[error("unsupported option key {0}")]
    UnsupportedKey(String),
    /// A known key whose value has the wrong kind or does not parse.
    #[error("invalid value for option {0}")]
    InvalidValue(&'static str),
}

#[cfg(feature = "server")]
impl TopicOptionsError {
    /// The `IggyError` code the server denies such a block with (before consensus, on the
    /// status channel): `UnsupportedOptionKey` (4041), `InvalidOptionValue` (4042), or
    /// `InvalidCommand` (3) for a block that breaks the contract.
    pub fn code(&self) -> u32 {
        match self {
            Self::Malformed(_) => 3,
            Self::UnsupportedKey(_) => 4041,
            Self::InvalidValue(_) => 4042,
        }
    }
}

/// The settings an `UPDATE_TOPIC` may change (the SDK's `TopicUpdateOptions`); `None`
/// leaves the topic's current value alone.
///
/// The 0.11.0 server also leaves a value alone when it is 0 (the "server default"
/// sentinel) for `message_expiry` and `max_topic_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TopicUpdateOptions {
    /// The compression algorithm.
    pub compression_algorithm: Option<CompressionAlgorithm>,
    /// Message expiry in µs (`u64::MAX` = never expire).
    pub message_expiry: Option<u64>,
    /// Topic size cap in bytes (`u64::MAX` = unlimited).
    pub max_topic_size: Option<u64>,
}

impl TopicUpdateOptions {
    /// Append the options block: one entry per present setting, keys in byte order
    /// (what the SDK's sorted map gives), the compression as its name and the two sizes as
    /// `Uint64` values, as the SDK writes them.
    pub fn encode(&self, out: &mut BytesMut) {
        if let Some(compression) = self.compression_algorithm {
            let name = compression.name();
            put_entry(
                out,
                topic_option_key::COMPRESSION_ALGORITHM,
                KIND_STRING,
                name.as_bytes(),
            );
        }
        if let Some(size) = self.max_topic_size {
            put_entry(
                out,
                topic_option_key::MAX_TOPIC_SIZE,
                KIND_UINT64,
                &size.to_le_bytes(),
            );
        }
        if let Some(expiry) = self.message_expiry {
            put_entry(
                out,
                topic_option_key::MESSAGE_EXPIRY,
                KIND_UINT64,
                &expiry.to_le_bytes(),
            );
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        let compression = self.compression_algorithm.map_or(0, |c| {
            entry_len(topic_option_key::COMPRESSION_ALGORITHM, c.name().len())
        });
        let size = self
            .max_topic_size
            .map_or(0, |_| entry_len(topic_option_key::MAX_TOPIC_SIZE, 8));
        let expiry = self
            .message_expiry
            .map_or(0, |_| entry_len(topic_option_key::MESSAGE_EXPIRY, 8));
        compression + size + expiry
    }

    /// The block as bytes.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut out);
        out.freeze()
    }
}

#[cfg(feature = "server")]
impl TopicUpdateOptions {
    /// Read a block as the server's update admission does: any other key is
    /// [`TopicOptionsError::UnsupportedKey`]; the compression is a `String` name or a
    /// `Uint8` code; the sizes are `Uint64` values. (The server also parses the sizes from
    /// humane strings such as `7 days`; this reader refuses those as invalid values.)
    pub fn parse(block: &[u8]) -> Result<Self, TopicOptionsError> {
        let mut options = Self::default();
        for entry in option_entries(block)? {
            match entry.key {
                topic_option_key::COMPRESSION_ALGORITHM => {
                    options.compression_algorithm = Some(parse_compression(&entry)?);
                }
                topic_option_key::MAX_TOPIC_SIZE => {
                    options.max_topic_size =
                        Some(parse_u64(&entry, topic_option_key::MAX_TOPIC_SIZE)?);
                }
                topic_option_key::MESSAGE_EXPIRY => {
                    options.message_expiry =
                        Some(parse_u64(&entry, topic_option_key::MESSAGE_EXPIRY)?);
                }
                other => return Err(TopicOptionsError::UnsupportedKey(other.to_owned())),
            }
        }
        Ok(options)
    }
}

#[cfg(feature = "server")]
fn parse_compression(entry: &OptionEntry<'_>) -> Result<CompressionAlgorithm, TopicOptionsError> {
    let invalid = TopicOptionsError::InvalidValue(topic_option_key::COMPRESSION_ALGORITHM);
    match (entry.value_kind, entry.value) {
        (KIND_UINT8, [code]) => CompressionAlgorithm::from_code(*code).ok_or(invalid),
        (KIND_STRING, text) => std::str::from_utf8(text)
            .ok()
            .and_then(CompressionAlgorithm::from_name)
            .ok_or(invalid),
        _ => Err(invalid),
    }
}

#[cfg(feature = "server")]
fn parse_u64(entry: &OptionEntry<'_>, key: &'static str) -> Result<u64, TopicOptionsError> {
    match (entry.value_kind, <[u8; 8]>::try_from(entry.value)) {
        (KIND_UINT64, Ok(bytes)) => Ok(u64::from_le_bytes(bytes)),
        _ => Err(TopicOptionsError::InvalidValue(key)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn update_options_round_trip_in_key_order() {
        let options = TopicUpdateOptions {
            compression_algorithm: Some(CompressionAlgorithm::Gzip),
            message_expiry: Some(7),
            max_topic_size: Some(u64::MAX),
        };
        let block = options.to_bytes();
        assert_eq!(block.len(), options.encoded_len());
        let keys: Vec<&str> = option_entries(&block)
            .unwrap()
            .iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(
            keys,
            ["compression_algorithm", "max_topic_size", "message_expiry"]
        );
        assert_eq!(TopicUpdateOptions::parse(&block).unwrap(), options);
        assert!(TopicUpdateOptions::default().to_bytes().is_empty());
        assert_eq!(
            TopicUpdateOptions::parse(&[]).unwrap(),
            TopicUpdateOptions::default()
        );
    }

    #[test]
    fn unknown_keys_bad_values_and_broken_blocks_are_typed() {
        let mut block = BytesMut::new();
        put_entry(&mut block, "segment_size", KIND_UINT64, &[0; 8]);
        let unsupported = TopicUpdateOptions::parse(&block).unwrap_err();
        assert_eq!(
            unsupported,
            TopicOptionsError::UnsupportedKey("segment_size".into())
        );
        assert_eq!(unsupported.code(), 4041);
        let mut block = BytesMut::new();
        put_entry(&mut block, "compression_algorithm", KIND_STRING, b"zstd");
        assert!(matches!(
            TopicUpdateOptions::parse(&block),
            Err(TopicOptionsError::InvalidValue(_))
        ));
        let mut block = BytesMut::new();
        put_entry(&mut block, "compression_algorithm", KIND_UINT8, &[2]);
        assert_eq!(
            TopicUpdateOptions::parse(&block)
                .unwrap()
                .compression_algorithm,
            Some(CompressionAlgorithm::Gzip)
        );
        let mut block = BytesMut::new();
        put_entry(&mut block, "message_expiry", KIND_STRING, b"7 days");
        assert!(TopicUpdateOptions::parse(&block).is_err());
        let mut twice = BytesMut::new();
        put_entry(&mut twice, "k", KIND_STRING, b"v");
        put_entry(&mut twice, "k", KIND_STRING, b"w");
        assert!(option_entries(&twice).is_err());
        let mut numeric_key = BytesMut::new();
        numeric_key.put_u8(KIND_UINT8);
        numeric_key.put_u32_le(1);
        numeric_key.put_u8(1);
        numeric_key.put_u8(KIND_STRING);
        numeric_key.put_u32_le(1);
        numeric_key.put_u8(b'v');
        assert!(option_entries(&numeric_key).is_err());
        for cut in 1..block.len() {
            assert!(option_entries(&block[..cut]).is_err());
        }
        assert!(option_entries(&vec![2u8; MAX_OPTIONS_BYTES + 1]).is_err());
    }
}
