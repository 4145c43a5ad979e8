//! Tests of typed user headers (`headers.rs`). Their byte-for-byte agreement with the SDK's
//! own encoding is checked in the workspace's tests crate, which links the SDK.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;
use crate::wire::{UserHeaders, validate_user_headers};

fn key(name: &str) -> HeaderKey {
    HeaderKey::try_from(name).unwrap()
}

#[test]
fn one_header_is_a_key_entry_then_a_value_entry() {
    let headers = UserHeaders::from([(key("k"), HeaderValue::from(7u32))]);
    let block = headers.encode();
    assert_eq!(
        &block[..],
        &[2, 1, 0, 0, 0, b'k', 11, 4, 0, 0, 0, 7, 0, 0, 0][..]
    );
    assert_eq!(block.len(), headers.encoded_len());
    assert_eq!(UserHeaders::decode(&block).unwrap(), headers);
    assert!(UserHeaders::new().encode().is_empty());
    assert_eq!(UserHeaders::decode(&[]).unwrap(), UserHeaders::new());
}

#[test]
fn keys_are_written_by_kind_code_then_bytes_whatever_the_insertion_order() {
    let mut headers = UserHeaders::new();
    headers.insert(key("b"), HeaderValue::from(true));
    headers.insert(HeaderKey::from(1u8), HeaderValue::from(1u8));
    headers.insert(key("a"), HeaderValue::from(false));
    headers.insert(HeaderKey::raw(&b"z"[..]).unwrap(), HeaderValue::from(2i8));
    let kinds: Vec<(HeaderKind, Vec<u8>)> = headers
        .iter()
        .map(|(k, _)| (k.kind(), k.as_bytes().to_vec()))
        .collect();
    assert_eq!(
        kinds,
        [
            (HeaderKind::Raw, b"z".to_vec()),
            (HeaderKind::String, b"a".to_vec()),
            (HeaderKind::String, b"b".to_vec()),
            (HeaderKind::Uint8, vec![1]),
        ]
    );
    let block = headers.encode();
    assert_eq!(&block[..6], &[1, 1, 0, 0, 0, b'z']);
}

#[test]
fn every_getter_reads_its_own_kind_and_refuses_the_others() {
    let value = HeaderValue::from(-5i64);
    assert_eq!(value.kind(), HeaderKind::Int64);
    assert_eq!(value.as_i64(), Ok(-5));
    assert_eq!(value.as_bytes(), &(-5i64).to_le_bytes()[..]);
    assert_eq!(
        value.as_u64(),
        Err(HeaderError::WrongKind {
            expected: HeaderKind::Uint64,
            actual: HeaderKind::Int64
        })
    );
    assert!(value.as_str().is_err());
    assert!(value.as_raw().is_err());
    assert!(value.as_bool().is_err());
    assert_eq!(HeaderValue::try_from("text").unwrap().as_str(), Ok("text"));
    assert_eq!(
        HeaderValue::try_from(vec![1, 2]).unwrap().as_raw(),
        Ok(&[1u8, 2][..])
    );
    assert_eq!(HeaderValue::from(true).as_bool(), Ok(true));
    assert_eq!(HeaderValue::from(1.5f32).as_f32(), Ok(1.5));
    assert_eq!(HeaderValue::from(u128::MAX).as_u128(), Ok(u128::MAX));
    assert_eq!(HeaderKey::from(9u16).as_u16(), Ok(9));
}

#[test]
fn fields_out_of_bounds_are_typed_errors() {
    assert_eq!(
        HeaderKey::try_from(""),
        Err(HeaderError::InvalidLength { len: 0 })
    );
    assert_eq!(
        HeaderValue::try_from("x".repeat(256)),
        Err(HeaderError::InvalidLength { len: 256 })
    );
    assert!(HeaderValue::try_from("x".repeat(255)).is_ok());
    assert_eq!(
        HeaderValue::raw(Vec::new()),
        Err(HeaderError::InvalidLength { len: 0 })
    );
    assert_eq!(
        HeaderValue::new(HeaderKind::Uint32, vec![1, 2, 3]),
        Err(HeaderError::WrongSize {
            kind: HeaderKind::Uint32,
            len: 3,
            expected: 4
        })
    );
    // A bool or string the SDK's decoder accepts, but its getter refuses.
    let bool_byte = HeaderValue::new(HeaderKind::Bool, vec![2]).unwrap();
    assert_eq!(
        bool_byte.as_bool(),
        Err(HeaderError::InvalidBool { byte: 2 })
    );
    let not_utf8 = HeaderValue::new(HeaderKind::String, vec![0xff]).unwrap();
    assert_eq!(not_utf8.as_str(), Err(HeaderError::InvalidUtf8));
}

#[test]
fn malformed_blocks_are_typed_errors() {
    let pair = [2, 1, 0, 0, 0, b'k', 9, 1, 0, 0, 0, 7];
    assert!(UserHeaders::decode(&pair).is_ok());
    // A key without its value, a cut entry, kind 0, a zero length.
    for block in [
        &pair[..6],
        &pair[..10],
        &[0, 1, 0, 0, 0, b'k', 9, 1, 0, 0, 0, 7][..],
        &[2, 0, 0, 0, 0, 9, 1, 0, 0, 0, 7][..],
    ] {
        assert!(matches!(
            UserHeaders::decode(block),
            Err(HeaderError::Malformed(_))
        ));
    }
    assert_eq!(
        UserHeaders::decode(&[16, 1, 0, 0, 0, b'k', 9, 1, 0, 0, 0, 7]),
        Err(HeaderError::UnknownKind { code: 16 })
    );
    assert_eq!(
        UserHeaders::decode(&[2, 1, 0, 0, 0, b'k', 11, 1, 0, 0, 0, 7]),
        Err(HeaderError::WrongSize {
            kind: HeaderKind::Uint32,
            len: 1,
            expected: 4
        })
    );
}

#[test]
fn a_key_set_twice_keeps_its_last_value_as_in_the_sdk() {
    let block = [
        2, 1, 0, 0, 0, b'k', 9, 1, 0, 0, 0, 1, 2, 1, 0, 0, 0, b'k', 9, 1, 0, 0, 0, 2,
    ];
    let headers = UserHeaders::decode(&block).unwrap();
    assert_eq!(headers.len(), 1);
    assert_eq!(headers.get_named("k").map(HeaderValue::as_u8), Some(Ok(2)));
}

#[test]
fn the_map_api_reads_like_a_map() {
    let mut headers: UserHeaders = [(key("a"), HeaderValue::from(1u8))].into_iter().collect();
    headers.extend([(key("b"), HeaderValue::from(2u8))]);
    assert_eq!(headers.len(), 2);
    assert!(headers.contains_key(&key("a")));
    assert_eq!(
        headers.insert(key("a"), HeaderValue::from(3u8)),
        Some(HeaderValue::from(1u8))
    );
    assert_eq!(headers.get(&key("a")), Some(&HeaderValue::from(3u8)));
    assert_eq!(headers.get_named(""), None);
    assert_eq!(headers.remove(&key("b")), Some(HeaderValue::from(2u8)));
    assert_eq!((&headers).into_iter().count(), 1);
    assert!(!headers.is_empty());
    assert_eq!(headers.into_iter().count(), 1);
    assert_eq!(HeaderKind::Uint32.to_string(), "uint32");
}

/// Any kind, with a value of a size that kind accepts.
fn field() -> impl Strategy<Value = (HeaderKind, Vec<u8>)> {
    proptest::sample::select(HeaderKind::ALL.to_vec()).prop_flat_map(|kind| {
        let sizes = match kind.fixed_size() {
            Some(size) => size..=size,
            None => 1..=MAX_FIELD_LENGTH,
        };
        (Just(kind), proptest::collection::vec(any::<u8>(), sizes))
    })
}

fn headers() -> impl Strategy<Value = UserHeaders> {
    proptest::collection::vec((field(), field()), 0..12).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|((kk, kv), (vk, vv))| {
                (
                    HeaderKey::new(kk, kv).unwrap(),
                    HeaderValue::new(vk, vv).unwrap(),
                )
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn any_headers_round_trip_through_their_block(headers in headers()) {
        let block = headers.encode();
        prop_assert_eq!(block.len(), headers.encoded_len());
        prop_assert_eq!(validate_user_headers(&block), Ok(super::len_u32(headers.len())));
        prop_assert_eq!(UserHeaders::decode(&block), Ok(headers));
    }

    /// A valid block with one byte changed and its tail cut: most fail deep inside an
    /// entry, where random bytes would fail at the first length.
    #[test]
    fn damaged_blocks_decode_or_fail_without_panicking(
        headers in headers(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut block = headers.encode().to_vec();
        if !block.is_empty() {
            let at = at.index(block.len());
            block[at] = byte;
            block.truncate(cut.index(block.len() + 1));
        }
        if let Ok(decoded) = UserHeaders::decode(&block) {
            prop_assert_eq!(UserHeaders::decode(&decoded.encode()), Ok(decoded));
        }
    }

    #[test]
    fn numbers_read_back_as_they_went_in(a in any::<i128>(), b in any::<u64>(), c in any::<f64>(), d in any::<i16>()) {
        prop_assert_eq!(HeaderValue::from(a).as_i128(), Ok(a));
        prop_assert_eq!(HeaderValue::from(b).as_u64(), Ok(b));
        prop_assert_eq!(HeaderValue::from(c).as_f64().map(f64::to_bits), Ok(c.to_bits()));
        prop_assert_eq!(HeaderKey::from(d).as_i16(), Ok(d));
    }
}
