//! Personal access tokens against the published 0.11.0 crates: for every request and
//! reply of commands 41-43, ours encodes to the bytes theirs encodes for the same values,
//! and each side decodes the other's bytes.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use iggy_binary_protocol::requests::personal_access_tokens::{
    CreatePersonalAccessTokenRequest as TCreatePat, DeletePersonalAccessTokenRequest as TDeletePat,
    GetPersonalAccessTokensRequest as TGetPats,
};
use iggy_binary_protocol::responses::personal_access_tokens::{
    GetPersonalAccessTokensResponse as TPats, PersonalAccessTokenResponse as TPat,
    RawPersonalAccessTokenResponse as TRawPat,
};
use iggy_binary_protocol::{WireDecode, WireEncode, WireName};
use iggy_route_core::wire::*;

fn ours(encode: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn wname(s: &str) -> WireName {
    WireName::new(s).unwrap()
}

/// Their bytes equal ours, and their decode of our bytes uses all of them and
/// re-encodes to the same.
fn same<T: WireEncode + WireDecode>(their: &T, our_bytes: &[u8]) {
    assert_eq!(their.to_bytes().as_ref(), our_bytes);
    let (decoded, used) = T::decode(our_bytes).unwrap();
    assert_eq!(used, our_bytes.len());
    assert_eq!(decoded.to_bytes().as_ref(), our_bytes);
}

#[test]
fn get_personal_access_tokens_has_an_empty_body() {
    assert!(TGetPats.to_bytes().is_empty());
    assert!(decode_personal_access_tokens(&[]).unwrap().is_empty());
}

#[test]
fn personal_access_token_requests() {
    for expiry in [
        TokenExpiry::ServerDefault,
        TokenExpiry::Never,
        TokenExpiry::After(std::time::Duration::from_secs(90)),
    ] {
        let request = CreatePersonalAccessTokenRequest {
            name: name("ci-token"),
            expiry: expiry.as_micros(),
        };
        let bytes = ours(|o| request.encode(o));
        assert_eq!(bytes.len(), request.encoded_len());
        let their = TCreatePat {
            name: wname("ci-token"),
            // What the SDK sends: `u64::from(PersonalAccessTokenExpiry)`.
            expiry: u64::from(match expiry {
                TokenExpiry::ServerDefault => iggy_common::IggyExpiry::ServerDefault,
                TokenExpiry::Never => iggy_common::IggyExpiry::NeverExpire,
                TokenExpiry::After(after) => {
                    iggy_common::IggyExpiry::ExpireDuration(iggy_common::IggyDuration::from(after))
                }
            }),
        };
        same(&their, &bytes);
        assert_eq!(
            CreatePersonalAccessTokenRequest::decode(&their.to_bytes()).unwrap(),
            request
        );
    }
    let delete = DeletePersonalAccessTokenRequest {
        name: name("ci-token"),
    };
    let bytes = ours(|o| delete.encode(o));
    same(
        &TDeletePat {
            name: wname("ci-token"),
        },
        &bytes,
    );
    assert_eq!(
        DeletePersonalAccessTokenRequest::decode(&bytes).unwrap(),
        delete
    );
}

#[test]
fn personal_access_token_replies() {
    let tokens = vec![
        PersonalAccessTokenInfo {
            name: name("ci"),
            expiry_at: 0,
        },
        PersonalAccessTokenInfo {
            name: name("deploy"),
            expiry_at: 1_800_000_000_000_000,
        },
    ];
    let bytes = ours(|o| encode_personal_access_tokens(&tokens, o));
    let their = TPats {
        tokens: vec![
            TPat {
                name: wname("ci"),
                expiry_at: 0,
            },
            TPat {
                name: wname("deploy"),
                expiry_at: 1_800_000_000_000_000,
            },
        ],
    };
    same(&their, &bytes);
    assert_eq!(
        decode_personal_access_tokens(&their.to_bytes()).unwrap(),
        tokens
    );

    let raw = RawPersonalAccessToken {
        token: Password::new("dG9rZW4tdGhhdC1pcy1zZWNyZXQ").unwrap(),
    };
    let bytes = ours(|o| raw.encode(o));
    assert_eq!(bytes.len(), raw.encoded_len());
    let their = TRawPat {
        token: wname("dG9rZW4tdGhhdC1pcy1zZWNyZXQ"),
    };
    same(&their, &bytes);
    assert_eq!(
        RawPersonalAccessToken::decode(&their.to_bytes()).unwrap(),
        raw
    );
}

#[test]
fn the_raw_token_never_reaches_debug_output() {
    let raw = RawPersonalAccessToken {
        token: Password::new("raw-token-secret").unwrap(),
    };
    assert!(!format!("{raw:?}").contains("raw-token-secret"));
    let decoded = RawPersonalAccessToken::decode(&ours(|o| raw.encode(o))).unwrap();
    assert_eq!(format!("{:?}", decoded.token), "***");
}
