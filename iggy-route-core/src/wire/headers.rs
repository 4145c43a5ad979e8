//! Typed user-header keys and values (§2); `user_headers.rs` holds the map of them a
//! message carries, and its block.
//!
//! A message's headers travel as one block of entries, a key entry then its value entry,
//! each `[kind:u8][len:u32 LE][len bytes]`, with `kind` one of [`HeaderKind`]'s codes and
//! `len` 1..=255. Keys and values keep their kind and bytes as the wire carries them, so
//! that a block read and written again is the same block.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::{Reader, WireError, len_u32};

/// Longest key or value, in bytes: the block's entries say 1..=255.
pub(super) const MAX_FIELD_LENGTH: usize = 255;

/// What a header key or value holds, with its code on the wire. The number kinds are
/// little-endian and exactly their type's size; `Raw` and `String` are 1..=255 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
#[repr(u8)]
pub enum HeaderKind {
    /// Bytes, as they are (code 1).
    Raw = 1,
    /// UTF-8 text (code 2).
    String = 2,
    /// One byte, 0 or 1 (code 3).
    Bool = 3,
    /// `i8` (code 4).
    Int8 = 4,
    /// `i16` (code 5).
    Int16 = 5,
    /// `i32` (code 6).
    Int32 = 6,
    /// `i64` (code 7).
    Int64 = 7,
    /// `i128` (code 8).
    Int128 = 8,
    /// `u8` (code 9).
    Uint8 = 9,
    /// `u16` (code 10).
    Uint16 = 10,
    /// `u32` (code 11).
    Uint32 = 11,
    /// `u64` (code 12).
    Uint64 = 12,
    /// `u128` (code 13).
    Uint128 = 13,
    /// `f32` (code 14).
    Float32 = 14,
    /// `f64` (code 15).
    Float64 = 15,
}

impl HeaderKind {
    /// Every kind, in code order.
    const ALL: [HeaderKind; 15] = [
        HeaderKind::Raw,
        HeaderKind::String,
        HeaderKind::Bool,
        HeaderKind::Int8,
        HeaderKind::Int16,
        HeaderKind::Int32,
        HeaderKind::Int64,
        HeaderKind::Int128,
        HeaderKind::Uint8,
        HeaderKind::Uint16,
        HeaderKind::Uint32,
        HeaderKind::Uint64,
        HeaderKind::Uint128,
        HeaderKind::Float32,
        HeaderKind::Float64,
    ];

    /// The kind's code on the wire.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// The kind of a code read off the wire, if the protocol defines it.
    pub(crate) fn from_code(code: u8) -> Option<HeaderKind> {
        Self::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The size every value of a number kind has; `None` for `Raw` and `String`.
    fn fixed_size(self) -> Option<usize> {
        match self {
            HeaderKind::Raw | HeaderKind::String => None,
            HeaderKind::Bool | HeaderKind::Int8 | HeaderKind::Uint8 => Some(1),
            HeaderKind::Int16 | HeaderKind::Uint16 => Some(2),
            HeaderKind::Int32 | HeaderKind::Uint32 | HeaderKind::Float32 => Some(4),
            HeaderKind::Int64 | HeaderKind::Uint64 | HeaderKind::Float64 => Some(8),
            HeaderKind::Int128 | HeaderKind::Uint128 => Some(16),
        }
    }
}

/// The SDK's names for the kinds (`uint32`, `string`, ...), so that logs read alike.
impl fmt::Display for HeaderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeaderKind::Raw => "raw",
            HeaderKind::String => "string",
            HeaderKind::Bool => "bool",
            HeaderKind::Int8 => "int8",
            HeaderKind::Int16 => "int16",
            HeaderKind::Int32 => "int32",
            HeaderKind::Int64 => "int64",
            HeaderKind::Int128 => "int128",
            HeaderKind::Uint8 => "uint8",
            HeaderKind::Uint16 => "uint16",
            HeaderKind::Uint32 => "uint32",
            HeaderKind::Uint64 => "uint64",
            HeaderKind::Uint128 => "uint128",
            HeaderKind::Float32 => "float32",
            HeaderKind::Float64 => "float64",
        })
    }
}

/// Why a header key or value could not be made or read, or a block not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A raw or string key or value is empty or longer than 255 bytes.
    #[error("header field of {len} bytes: must be 1 to 255")]
    InvalidLength {
        /// Its length.
        len: usize,
    },
    /// A number kind holds a value of another size than its type's.
    #[error("{kind} header field of {len} bytes: must be {expected}")]
    WrongSize {
        /// The kind.
        kind: HeaderKind,
        /// The value's length.
        len: usize,
        /// The kind's size.
        expected: usize,
    },
    /// The field holds another kind than the one asked for.
    #[error("header field is {actual}, not {expected}")]
    WrongKind {
        /// The kind asked for.
        expected: HeaderKind,
        /// The kind it holds.
        actual: HeaderKind,
    },
    /// A string field is not valid UTF-8 (the block came from a writer that did not check).
    #[error("string header field is not valid utf-8")]
    InvalidUtf8,
    /// A bool field holds another byte than 0 or 1.
    #[error("bool header field holds {byte}")]
    InvalidBool {
        /// The byte.
        byte: u8,
    },
    /// A block names a kind code the protocol does not define.
    #[error("unknown header kind {code}")]
    UnknownKind {
        /// The code.
        code: u8,
    },
    /// The block is not a whole sequence of key and value entries.
    #[error("malformed user-header block: {0}")]
    Malformed(#[from] WireError),
}

/// A key or value: its kind and its bytes, as the wire carries them. Ordered by kind code,
/// then bytes: the SDK's order, which sets the order of a block's entries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Field {
    kind: HeaderKind,
    value: Bytes,
}

impl Field {
    fn new(kind: HeaderKind, value: Bytes) -> Result<Self, HeaderError> {
        match kind.fixed_size() {
            Some(expected) if value.len() != expected => Err(HeaderError::WrongSize {
                kind,
                len: value.len(),
                expected,
            }),
            None if value.is_empty() || value.len() > MAX_FIELD_LENGTH => {
                Err(HeaderError::InvalidLength { len: value.len() })
            }
            Some(_) | None => Ok(Self { kind, value }),
        }
    }

    /// A number kind's bytes, for the infallible `From` conversions: their size is the
    /// kind's by construction.
    fn number<const N: usize>(kind: HeaderKind, bytes: [u8; N]) -> Self {
        Self {
            kind,
            value: Bytes::copy_from_slice(&bytes),
        }
    }

    fn expect(&self, kind: HeaderKind) -> Result<&[u8], HeaderError> {
        if self.kind == kind {
            Ok(&self.value)
        } else {
            Err(HeaderError::WrongKind {
                expected: kind,
                actual: self.kind,
            })
        }
    }

    fn fixed<const N: usize>(&self, kind: HeaderKind) -> Result<[u8; N], HeaderError> {
        let bytes = self.expect(kind)?;
        // Always N bytes (checked when made); the error keeps a bad invariant from panicking.
        bytes.try_into().map_err(|_| HeaderError::WrongSize {
            kind,
            len: bytes.len(),
            expected: N,
        })
    }

    fn as_str(&self) -> Result<&str, HeaderError> {
        std::str::from_utf8(self.expect(HeaderKind::String)?).map_err(|_| HeaderError::InvalidUtf8)
    }

    fn as_bool(&self) -> Result<bool, HeaderError> {
        match self.fixed::<1>(HeaderKind::Bool)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [byte] => Err(HeaderError::InvalidBool { byte }),
        }
    }

    fn encoded_len(&self) -> usize {
        1 + 4 + self.value.len()
    }

    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.kind.code());
        out.put_u32_le(len_u32(self.value.len()));
        out.put_slice(&self.value);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, HeaderError> {
        let code = r.u8()?;
        let len = r.u32()? as usize;
        let bytes = r.bytes(len)?;
        let kind = HeaderKind::from_code(code).ok_or(HeaderError::UnknownKind { code })?;
        Self::new(kind, Bytes::copy_from_slice(bytes))
    }
}

/// The API of a key and of a value: the same kinds, constructors and getters, on two types
/// so that a key cannot stand where a value is meant.
macro_rules! header_field {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Field);

        impl $name {
            /// A field of `kind` holding `value` as the wire carries it (numbers
            /// little-endian): exactly the type's size for a number kind, 1..=255 bytes for
            /// `Raw` and `String` (a `String` field is not checked for UTF-8 here; `as_str`
            /// does).
            pub fn new(kind: HeaderKind, value: impl Into<Bytes>) -> Result<Self, HeaderError> {
                Field::new(kind, value.into()).map(Self)
            }

            /// A `Raw` field: 1..=255 bytes.
            pub fn raw(value: impl Into<Bytes>) -> Result<Self, HeaderError> {
                Self::new(HeaderKind::Raw, value)
            }

            /// A `String` field: 1..=255 bytes of UTF-8.
            pub fn string(value: &str) -> Result<Self, HeaderError> {
                Self::new(HeaderKind::String, Bytes::copy_from_slice(value.as_bytes()))
            }

            /// What it holds.
            pub fn kind(&self) -> HeaderKind {
                self.0.kind
            }

            /// Its bytes as the wire carries them, whatever its kind.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0.value
            }

            /// The bytes of a `Raw` field.
            pub fn as_raw(&self) -> Result<&[u8], HeaderError> {
                self.0.expect(HeaderKind::Raw)
            }

            /// The text of a `String` field.
            pub fn as_str(&self) -> Result<&str, HeaderError> {
                self.0.as_str()
            }

            /// A `Bool` field.
            pub fn as_bool(&self) -> Result<bool, HeaderError> {
                self.0.as_bool()
            }

            /// Size of its entry in a block.
            pub(super) fn entry_len(&self) -> usize {
                self.0.encoded_len()
            }

            /// Appends its entry to a block.
            pub(super) fn encode_entry(&self, out: &mut BytesMut) {
                self.0.encode(out);
            }

            /// Reads its entry from a block.
            pub(super) fn decode_entry(r: &mut Reader<'_>) -> Result<Self, HeaderError> {
                Field::decode(r).map(Self)
            }

            header_field!(@getters
                as_i8 i8 Int8, as_i16 i16 Int16, as_i32 i32 Int32, as_i64 i64 Int64,
                as_i128 i128 Int128, as_u8 u8 Uint8, as_u16 u16 Uint16, as_u32 u32 Uint32,
                as_u64 u64 Uint64, as_u128 u128 Uint128, as_f32 f32 Float32, as_f64 f64 Float64
            );
        }

        impl From<bool> for $name {
            fn from(value: bool) -> Self {
                Self(Field::number(HeaderKind::Bool, [u8::from(value)]))
            }
        }

        header_field!(@from $name:
            i8 Int8, i16 Int16, i32 Int32, i64 Int64, i128 Int128, u8 Uint8, u16 Uint16,
            u32 Uint32, u64 Uint64, u128 Uint128, f32 Float32, f64 Float64
        );

        /// A `String` field (1..=255 bytes).
        impl TryFrom<&str> for $name {
            type Error = HeaderError;
            fn try_from(value: &str) -> Result<Self, HeaderError> {
                Self::string(value)
            }
        }

        /// A `String` field (1..=255 bytes).
        impl TryFrom<String> for $name {
            type Error = HeaderError;
            fn try_from(value: String) -> Result<Self, HeaderError> {
                Self::new(HeaderKind::String, value)
            }
        }

        /// A `Raw` field (1..=255 bytes).
        impl TryFrom<&[u8]> for $name {
            type Error = HeaderError;
            fn try_from(value: &[u8]) -> Result<Self, HeaderError> {
                Self::raw(Bytes::copy_from_slice(value))
            }
        }

        /// A `Raw` field (1..=255 bytes).
        impl TryFrom<Vec<u8>> for $name {
            type Error = HeaderError;
            fn try_from(value: Vec<u8>) -> Result<Self, HeaderError> {
                Self::raw(value)
            }
        }
    };
    (@getters $($getter:ident $ty:ident $kind:ident),* $(,)?) => {
        $(
            #[doc = concat!("The `", stringify!($ty), "` of a `", stringify!($kind), "` field.")]
            pub fn $getter(&self) -> Result<$ty, HeaderError> {
                self.0.fixed(HeaderKind::$kind).map($ty::from_le_bytes)
            }
        )*
    };
    (@from $name:ident: $($ty:ident $kind:ident),* $(,)?) => {
        $(
            #[doc = concat!("A `", stringify!($kind), "` field.")]
            impl From<$ty> for $name {
                fn from(value: $ty) -> Self {
                    Self(Field::number(HeaderKind::$kind, value.to_le_bytes()))
                }
            }
        )*
    };
}

header_field! {
    /// A user-header key: a kind and 1..=255 bytes, usually a string (`HeaderKey::try_from
    /// ("content-type")`). Made from a number with `From` (`HeaderKey::from(7u32)`), from
    /// text or bytes with `TryFrom` or [`HeaderKey::string`] / [`HeaderKey::raw`]; read
    /// back with the `as_*` getters, which fail with [`HeaderError::WrongKind`] for
    /// another kind. Keys order by kind, then bytes, as in the SDK.
    HeaderKey
}

header_field! {
    /// A user-header value: a kind and 1..=255 bytes. Made from a number or a bool with
    /// `From` (`HeaderValue::from(42u32)`), from text or bytes with `TryFrom` or
    /// [`HeaderValue::string`] / [`HeaderValue::raw`]; read back with the `as_*` getters
    /// (`as_u32`, `as_str`, ...), which fail with [`HeaderError::WrongKind`] for another
    /// kind.
    HeaderValue
}

#[cfg(test)]
#[path = "headers_tests.rs"]
mod tests;
