//! Primitive encodings (§2): names, identifiers, consumers, polling strategies,
//! and partitioning.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::{Reader, WireError};
use crate::partitioning::{MAX_MESSAGES_KEY_LENGTH, Partitioning};

/// A `WireName`: 1..=255 bytes of UTF-8, encoded `[len:u8][bytes]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// Validate and wrap a name.
    pub fn new(name: impl Into<String>) -> Result<Name, WireError> {
        let name = name.into();
        if name.is_empty() || name.len() > 255 {
            return Err(WireError::InvalidLength {
                field: "name",
                len: name.len(),
            });
        }
        Ok(Name(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Append `[len:u8][bytes]`.
    pub fn encode(&self, out: &mut BytesMut) {
        // Invariant: 1..=255 bytes, checked by `new` and `decode`.
        out.put_u8(self.0.len() as u8);
        out.put_slice(self.0.as_bytes());
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        1 + self.0.len()
    }

    /// Read `[len:u8][bytes]`.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let len = r.u8()? as usize;
        if len == 0 {
            return Err(WireError::InvalidLength { field: "name", len });
        }
        let bytes = r.bytes(len)?;
        let text =
            std::str::from_utf8(bytes).map_err(|_| WireError::InvalidUtf8 { field: "name" })?;
        Ok(Name(text.to_owned()))
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for Name {
    type Error = WireError;
    fn try_from(value: &str) -> Result<Self, WireError> {
        Name::new(value)
    }
}

/// A stream, topic or consumer identifier: `[kind:u8][len:u8][value]`.
///
/// From a number (`7u32.into()`) it is that id; from a `&str` (`TryFrom<&str>`, what a
/// `&str` argument of the clients means) it is always a name, digits included: `"7"` is
/// the stream named "7". The SDK 0.11.0 reads a string of digits as a numeric id instead;
/// [`Identifier::parse`] follows the SDK's rule, for ids that come as text (a command line,
/// a configuration file).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identifier {
    /// Kind 1: a numeric id (len 4, u32 LE).
    Numeric(u32),
    /// Kind 2: a name.
    Named(Name),
}

impl Identifier {
    /// `s` read as the SDK 0.11.0's `Identifier::from_str` reads it: a numeric id when `s`
    /// is a `u32` in decimal, as `u32::from_str` accepts it (digits with an optional
    /// leading `+`, leading zeros allowed, at most 4294967295), else a name of 1..=255
    /// bytes. `"7"`, `"+7"` and `"007"` are id 7; `"-1"`, `"7a"` and `"4294967296"` are
    /// names. Unlike `TryFrom<&str>`, which never reads digits as an id.
    pub fn parse(s: &str) -> Result<Identifier, WireError> {
        match s.parse::<u32>() {
            Ok(id) => Ok(Identifier::Numeric(id)),
            Err(_) => Name::new(s).map(Identifier::Named),
        }
    }

    /// Append the wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Identifier::Numeric(id) => {
                out.put_u8(1);
                out.put_u8(4);
                out.put_u32_le(*id);
            }
            Identifier::Named(name) => {
                out.put_u8(2);
                name.encode(out);
            }
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Identifier::Numeric(_) => 6,
            Identifier::Named(name) => 1 + name.encoded_len(),
        }
    }

    /// Read the wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        match r.u8()? {
            1 => {
                let len = r.u8()?;
                if len != 4 {
                    return Err(WireError::InvalidLength {
                        field: "numeric identifier",
                        len: len.into(),
                    });
                }
                Ok(Identifier::Numeric(r.u32()?))
            }
            2 => Ok(Identifier::Named(Name::decode(r)?)),
            kind => Err(WireError::InvalidValue {
                field: "identifier kind",
                value: kind.into(),
            }),
        }
    }
}

impl From<u32> for Identifier {
    fn from(id: u32) -> Self {
        Identifier::Numeric(id)
    }
}

impl From<Name> for Identifier {
    fn from(name: Name) -> Self {
        Identifier::Named(name)
    }
}

/// Always a named identifier (no parsing of digits: `"7"` is the name "7"), validated as a
/// [`Name`]; [`Identifier::parse`] reads digits as an id, as the SDK does.
impl TryFrom<&str> for Identifier {
    type Error = WireError;
    fn try_from(value: &str) -> Result<Self, WireError> {
        Name::new(value).map(Identifier::Named)
    }
}

impl fmt::Display for Identifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identifier::Numeric(id) => write!(f, "{id}"),
            Identifier::Named(name) => f.write_str(name.as_str()),
        }
    }
}

/// Whether offsets belong to a single consumer or a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ConsumerKind {
    /// A single consumer.
    Consumer = 1,
    /// A consumer group.
    ConsumerGroup = 2,
}

/// A `WireConsumer`: `[kind:u8][Identifier]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Consumer {
    /// Consumer or group.
    pub kind: ConsumerKind,
    /// Its id.
    pub id: Identifier,
}

impl Consumer {
    /// Append the wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.kind as u8);
        self.id.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        1 + self.id.encoded_len()
    }

    /// Read the wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let kind = match r.u8()? {
            1 => ConsumerKind::Consumer,
            2 => ConsumerKind::ConsumerGroup,
            other => {
                return Err(WireError::InvalidValue {
                    field: "consumer kind",
                    value: other.into(),
                });
            }
        };
        Ok(Consumer {
            kind,
            id: Identifier::decode(r)?,
        })
    }
}

/// Where a poll starts: `[kind:u8][value:u64]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PollingStrategy {
    /// Kind 1: from this offset.
    Offset(u64),
    /// Kind 2: from this timestamp (µs).
    Timestamp(u64),
    /// Kind 3: from the first message.
    First,
    /// Kind 4: the last messages.
    Last,
    /// Kind 5: after the stored consumer offset.
    Next,
}

impl PollingStrategy {
    /// Append the 9-byte wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        let (kind, value) = match *self {
            PollingStrategy::Offset(v) => (1, v),
            PollingStrategy::Timestamp(v) => (2, v),
            PollingStrategy::First => (3, 0),
            PollingStrategy::Last => (4, 0),
            PollingStrategy::Next => (5, 0),
        };
        out.put_u8(kind);
        out.put_u64_le(value);
    }

    /// Always 9.
    pub fn encoded_len(&self) -> usize {
        9
    }

    /// Read the 9-byte wire form (the value of First/Last/Next is ignored).
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let kind = r.u8()?;
        let value = r.u64()?;
        match kind {
            1 => Ok(PollingStrategy::Offset(value)),
            2 => Ok(PollingStrategy::Timestamp(value)),
            3 => Ok(PollingStrategy::First),
            4 => Ok(PollingStrategy::Last),
            5 => Ok(PollingStrategy::Next),
            other => Err(WireError::InvalidValue {
                field: "polling strategy kind",
                value: other.into(),
            }),
        }
    }
}

impl Partitioning {
    /// Append the `WirePartitioning` form `[kind:u8][len:u8][value]`.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Partitioning::Balanced => {
                out.put_u8(1);
                out.put_u8(0);
            }
            Partitioning::PartitionId(id) => {
                out.put_u8(2);
                out.put_u8(4);
                out.put_u32_le(*id);
            }
            Partitioning::MessagesKey(key) => {
                out.put_u8(3);
                // Invariant: keys are 1..=255 bytes when built through the
                // constructors; an oversized key built by hand is cut to fit.
                let key = &key[..key.len().min(MAX_MESSAGES_KEY_LENGTH)];
                out.put_u8(key.len() as u8);
                out.put_slice(key);
            }
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Partitioning::Balanced => 2,
            Partitioning::PartitionId(_) => 6,
            Partitioning::MessagesKey(key) => 2 + key.len().min(MAX_MESSAGES_KEY_LENGTH),
        }
    }

    /// Read the `WirePartitioning` form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let kind = r.u8()?;
        let len = r.u8()? as usize;
        match (kind, len) {
            (1, 0) => Ok(Partitioning::Balanced),
            (2, 4) => Ok(Partitioning::PartitionId(r.u32()?)),
            (3, 1..) => Ok(Partitioning::MessagesKey(Bytes::copy_from_slice(
                r.bytes(len)?,
            ))),
            (1..=3, _) => Err(WireError::InvalidLength {
                field: "partitioning",
                len,
            }),
            (kind, _) => Err(WireError::InvalidValue {
                field: "partitioning kind",
                value: kind.into(),
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn round_trip<T: PartialEq + fmt::Debug>(
        value: &T,
        encode: impl Fn(&T, &mut BytesMut),
        decode: impl Fn(&mut Reader<'_>) -> Result<T, WireError>,
    ) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(value, &mut out);
        let mut r = Reader::new(&out);
        assert_eq!(&decode(&mut r).unwrap(), value);
        r.finish("value").unwrap();
        out.to_vec()
    }

    #[test]
    fn identifiers_encode_kind_length_value() {
        let bytes = round_trip(
            &Identifier::Numeric(7),
            Identifier::encode,
            Identifier::decode,
        );
        assert_eq!(bytes, [1, 4, 7, 0, 0, 0]);
        let named = Identifier::try_from("orders").unwrap();
        let bytes = round_trip(&named, Identifier::encode, Identifier::decode);
        assert_eq!(bytes, b"\x02\x06orders");
        assert_eq!(named.to_string(), "orders");
        assert!(Identifier::decode(&mut Reader::new(&[1, 3, 0, 0, 0])).is_err());
        assert!(Identifier::decode(&mut Reader::new(&[2, 0])).is_err());
        assert!(Identifier::decode(&mut Reader::new(&[2, 1, 0xff])).is_err());
    }

    #[test]
    fn parse_reads_a_decimal_u32_as_an_id_and_anything_else_as_a_name() {
        for (text, id) in [
            ("7", 7),
            ("+7", 7),
            ("007", 7),
            ("0", 0),
            ("4294967295", u32::MAX),
        ] {
            assert_eq!(Identifier::parse(text).unwrap(), Identifier::Numeric(id));
        }
        for text in ["-1", "7a", " 7", "4294967296", "orders"] {
            assert_eq!(
                Identifier::parse(text).unwrap(),
                Identifier::Named(Name::new(text).unwrap())
            );
        }
        assert!(Identifier::parse("").is_err());
        assert!(Identifier::parse(&"x".repeat(256)).is_err());
        assert_eq!(
            Identifier::try_from("7").unwrap(),
            Identifier::Named(Name::new("7").unwrap()),
            "a &str stays a name"
        );
    }

    #[test]
    fn names_are_one_to_255_bytes() {
        assert!(Name::new("").is_err());
        assert!(Name::new("x".repeat(256)).is_err());
        assert_eq!(Name::new("x".repeat(255)).unwrap().encoded_len(), 256);
    }

    #[test]
    fn partitioning_and_strategy_round_trip() {
        for p in [
            Partitioning::Balanced,
            Partitioning::PartitionId(3),
            Partitioning::messages_key(&b"k"[..]).unwrap(),
        ] {
            let bytes = round_trip(&p, Partitioning::encode, Partitioning::decode);
            assert_eq!(bytes.len(), p.encoded_len());
        }
        for s in [
            PollingStrategy::Offset(9),
            PollingStrategy::Timestamp(1),
            PollingStrategy::Next,
        ] {
            round_trip(&s, PollingStrategy::encode, PollingStrategy::decode);
        }
        assert!(Partitioning::decode(&mut Reader::new(&[3, 0])).is_err());
        assert!(PollingStrategy::decode(&mut Reader::new(&[6, 0, 0, 0, 0, 0, 0, 0, 0])).is_err());
    }
}
