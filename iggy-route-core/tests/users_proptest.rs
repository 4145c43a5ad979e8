//! Property tests for the user, permission and token codecs: generated values round-trip,
//! and every decoder is total on any bytes, in particular on valid encodings with one
//! byte changed or cut short (an `Err`, never a panic or a huge allocation).
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use iggy_route_core::wire::*;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = Name> {
    "[a-z0-9._-]{1,20}".prop_map(|s| Name::new(s).unwrap())
}

fn identifier() -> impl Strategy<Value = Identifier> {
    prop_oneof![
        any::<u32>().prop_map(Identifier::Numeric),
        name().prop_map(Identifier::Named)
    ]
}

fn topic() -> impl Strategy<Value = TopicPermissions> {
    (any::<u32>(), any::<[bool; 4]>()).prop_map(|(topic_id, f)| TopicPermissions {
        topic_id,
        manage_topic: f[0],
        read_topic: f[1],
        poll_messages: f[2],
        send_messages: f[3],
    })
}

fn stream() -> impl Strategy<Value = StreamPermissions> {
    (
        any::<u32>(),
        any::<[bool; 6]>(),
        proptest::collection::vec(topic(), 0..4),
    )
        .prop_map(|(stream_id, f, topics)| StreamPermissions {
            stream_id,
            manage_stream: f[0],
            read_stream: f[1],
            manage_topics: f[2],
            read_topics: f[3],
            poll_messages: f[4],
            send_messages: f[5],
            topics,
        })
}

fn permissions() -> impl Strategy<Value = Permissions> {
    (
        any::<[bool; 10]>(),
        proptest::collection::vec(stream(), 0..4),
    )
        .prop_map(|(f, streams)| Permissions {
            global: GlobalPermissions {
                manage_servers: f[0],
                read_servers: f[1],
                manage_users: f[2],
                read_users: f[3],
                manage_streams: f[4],
                read_streams: f[5],
                manage_topics: f[6],
                read_topics: f[7],
                poll_messages: f[8],
                send_messages: f[9],
            },
            streams,
        })
}

fn status() -> impl Strategy<Value = UserStatus> {
    prop_oneof![Just(UserStatus::Active), Just(UserStatus::Inactive)]
}

fn details() -> impl Strategy<Value = UserDetails> {
    (
        any::<u32>(),
        any::<u64>(),
        status(),
        name(),
        proptest::option::of(permissions()),
    )
        .prop_map(
            |(id, created_at, status, username, permissions)| UserDetails {
                id,
                created_at,
                status,
                username,
                permissions,
            },
        )
}

fn encoded(encode: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

/// Runs every user and token decoder, client and server halves, on `bytes`.
fn decode_everything(bytes: &[u8]) {
    let _ = Permissions::read(&mut Reader::new(bytes));
    let _ = GetUserRequest::decode(bytes);
    let _ = CreateUserRequest::decode(bytes);
    let _ = UpdateUserRequest::decode(bytes);
    let _ = UpdatePermissionsRequest::decode(bytes);
    let _ = ChangePasswordRequest::decode(bytes);
    let _ = UserDetails::decode_optional(bytes);
    let _ = decode_users(bytes);
    let _ = CreatePersonalAccessTokenRequest::decode(bytes);
    let _ = DeletePersonalAccessTokenRequest::decode(bytes);
    let _ = decode_personal_access_tokens(bytes);
    let _ = RawPersonalAccessToken::decode(bytes);
}

proptest! {
    #[test]
    fn permissions_and_details_round_trip(value in details()) {
        let bytes = encoded(|o| value.encode(o));
        prop_assert_eq!(bytes.len(), value.encoded_len());
        prop_assert_eq!(UserDetails::decode(&bytes).unwrap(), value.clone());
        let users = encoded(|o| encode_users(&[value.info(), value.info()], o));
        prop_assert_eq!(decode_users(&users).unwrap(), vec![value.info(), value.info()]);
    }

    #[test]
    fn requests_round_trip(
        user in identifier(),
        username in name(),
        new_status in proptest::option::of(status()),
        permissions in proptest::option::of(permissions()),
    ) {
        let update = UpdateUserRequest {
            user: user.clone(),
            username: Some(username.clone()),
            status: new_status,
        };
        prop_assert_eq!(UpdateUserRequest::decode(&encoded(|o| update.encode(o))).unwrap(), update);
        let grant = UpdatePermissionsRequest { user, permissions: permissions.clone() };
        prop_assert_eq!(
            UpdatePermissionsRequest::decode(&encoded(|o| grant.encode(o))).unwrap(),
            grant
        );
        let create = CreateUserRequest {
            username,
            password: Password::new("pw-1").unwrap(),
            status: UserStatus::Active,
            permissions,
        };
        prop_assert_eq!(CreateUserRequest::decode(&encoded(|o| create.encode(o))).unwrap(), create);
    }

    #[test]
    fn decoders_are_total_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        decode_everything(&bytes);
    }

    #[test]
    fn decoders_are_total_on_damaged_encodings(
        value in details(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encoded(|o| value.encode(o));
        let index = at.index(bytes.len());
        bytes[index] = byte;
        decode_everything(&bytes);
        decode_everything(&bytes[..cut.index(bytes.len())]);
        let create = CreateUserRequest {
            username: value.username,
            password: Password::new("pw-1").unwrap(),
            status: value.status,
            permissions: value.permissions,
        };
        let mut bytes = encoded(|o| create.encode(o));
        let index = at.index(bytes.len());
        bytes[index] = byte;
        decode_everything(&bytes);
    }
}
