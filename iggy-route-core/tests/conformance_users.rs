//! Users and permissions against the published 0.11.0 crates: for every request and
//! reply of commands 31-37, ours encodes to the bytes theirs encodes for the same values,
//! and each side decodes the other's bytes. Tokens (41-43) are in `conformance_tokens.rs`.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::BytesMut;
use iggy_binary_protocol::primitives::permissions::{
    WireGlobalPermissions, WirePermissions, WireStreamPermissions, WireTopicPermissions,
};
use iggy_binary_protocol::requests::personal_access_tokens::GetPersonalAccessTokensRequest as TGetPats;
use iggy_binary_protocol::requests::users::{
    ChangePasswordRequest as TChangePassword, CreateUserRequest as TCreateUser,
    DeleteUserRequest as TDeleteUser, GetUserRequest as TGetUser, GetUsersRequest as TGetUsers,
    UpdatePermissionsRequest as TUpdatePermissions, UpdateUserRequest as TUpdateUser,
};
use iggy_binary_protocol::responses::users::{
    GetUsersResponse as TUsers, UserDetailsResponse as TDetails, UserResponse as TUser,
};
use iggy_binary_protocol::{WireDecode, WireEncode, WireIdentifier, WireName, WireOptions};
use iggy_common::wire_conversions::permissions_to_wire;
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

/// An irregular flag pattern, so a field written into the wrong slot shows.
fn global() -> (GlobalPermissions, WireGlobalPermissions) {
    let flags = [
        true, false, false, true, true, false, true, true, false, true,
    ];
    let ours = GlobalPermissions {
        manage_servers: flags[0],
        read_servers: flags[1],
        manage_users: flags[2],
        read_users: flags[3],
        manage_streams: flags[4],
        read_streams: flags[5],
        manage_topics: flags[6],
        read_topics: flags[7],
        poll_messages: flags[8],
        send_messages: flags[9],
    };
    let theirs = WireGlobalPermissions {
        manage_servers: flags[0],
        read_servers: flags[1],
        manage_users: flags[2],
        read_users: flags[3],
        manage_streams: flags[4],
        read_streams: flags[5],
        manage_topics: flags[6],
        read_topics: flags[7],
        poll_messages: flags[8],
        send_messages: flags[9],
    };
    (ours, theirs)
}

fn topic(id: u32, flags: [bool; 4]) -> (TopicPermissions, WireTopicPermissions) {
    let [manage_topic, read_topic, poll_messages, send_messages] = flags;
    (
        TopicPermissions {
            topic_id: id,
            manage_topic,
            read_topic,
            poll_messages,
            send_messages,
        },
        WireTopicPermissions {
            topic_id: id,
            manage_topic,
            read_topic,
            poll_messages,
            send_messages,
        },
    )
}

fn stream(
    id: u32,
    flags: [bool; 6],
    topics: Vec<(TopicPermissions, WireTopicPermissions)>,
) -> (StreamPermissions, WireStreamPermissions) {
    let [
        manage_stream,
        read_stream,
        manage_topics,
        read_topics,
        poll_messages,
        send_messages,
    ] = flags;
    let (our_topics, their_topics) = topics.into_iter().unzip();
    (
        StreamPermissions {
            stream_id: id,
            manage_stream,
            read_stream,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
            topics: our_topics,
        },
        WireStreamPermissions {
            stream_id: id,
            manage_stream,
            read_stream,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
            topics: their_topics,
        },
    )
}

/// Three streams: one with two topics, one with none, one with one topic.
fn permissions() -> (Permissions, WirePermissions) {
    let (our_global, their_global) = global();
    let streams = vec![
        stream(
            1,
            [false, true, false, false, true, false],
            vec![
                topic(10, [true, false, false, true]),
                topic(11, [false, true, true, false]),
            ],
        ),
        stream(2, [true, false, true, false, false, true], vec![]),
        stream(
            300_000,
            [false, false, false, true, false, false],
            vec![topic(7, [false, false, true, true])],
        ),
    ];
    let (our_streams, their_streams) = streams.into_iter().unzip();
    (
        Permissions {
            global: our_global,
            streams: our_streams,
        },
        WirePermissions {
            global: their_global,
            streams: their_streams,
        },
    )
}

#[test]
fn permissions_match_the_crate_and_the_sdk_domain_conversion() {
    let (ours_value, theirs) = permissions();
    let bytes = ours(|o| ours_value.encode(o));
    same(&theirs, &bytes);
    assert_eq!(bytes.len(), ours_value.encoded_len());
    let their_bytes = theirs.to_bytes();
    let mut r = Reader::new(&their_bytes);
    assert_eq!(Permissions::read(&mut r).unwrap(), ours_value);
    assert_eq!(r.remaining(), 0);

    // What the SDK actually sends: its domain `Permissions` (BTreeMaps) through
    // `permissions_to_wire`, i.e. streams and topics in id order.
    let domain: iggy_common::Permissions = theirs.clone().into();
    assert!(domain.streams.as_ref().is_some_and(|s| s.len() == 3));
    assert_eq!(permissions_to_wire(&domain).to_bytes().as_ref(), &bytes[..]);
    let empty = iggy_common::Permissions {
        streams: Some(BTreeMap::new()),
        ..iggy_common::Permissions::default()
    };
    assert_eq!(
        permissions_to_wire(&empty).to_bytes().as_ref(),
        &ours(|o| Permissions::default().encode(o))[..]
    );
}

fn identifiers() -> Vec<(Identifier, WireIdentifier)> {
    vec![
        (Identifier::Numeric(0), WireIdentifier::numeric(0)),
        (Identifier::Numeric(42), WireIdentifier::numeric(42)),
        (
            Identifier::try_from("alice").unwrap(),
            WireIdentifier::named("alice").unwrap(),
        ),
    ]
}

#[test]
fn get_user_get_users_and_delete_user_requests() {
    for (id, wire_id) in identifiers() {
        let request = GetUserRequest { user: id };
        let bytes = ours(|o| request.encode(o));
        same(
            &TGetUser {
                user_id: wire_id.clone(),
            },
            &bytes,
        );
        same(&TDeleteUser { user_id: wire_id }, &bytes);
        assert_eq!(GetUserRequest::decode(&bytes).unwrap(), request);
        assert_eq!(DeleteUserRequest::decode(&bytes).unwrap(), request);
    }
    // GET_USERS and GET_PERSONAL_ACCESS_TOKENS have empty bodies.
    assert!(TGetUsers.to_bytes().is_empty());
    assert!(TGetPats.to_bytes().is_empty());
}

#[test]
fn create_user_request_with_and_without_permissions() {
    let (ours_permissions, their_permissions) = permissions();
    let cases = [
        (None, None, UserStatus::Active),
        (
            Some(ours_permissions),
            Some(their_permissions),
            UserStatus::Inactive,
        ),
    ];
    for (ours_p, theirs_p, status) in cases {
        let request = CreateUserRequest::new("alice", "pa55-word", status, ours_p).unwrap();
        let bytes = ours(|o| request.encode(o));
        assert_eq!(bytes.len(), request.encoded_len());
        let their = TCreateUser {
            username: wname("alice"),
            password: "pa55-word".to_owned(),
            status: status.as_u8(),
            permissions: theirs_p,
            options: WireOptions::empty(),
        };
        same(&their, &bytes);
        assert_eq!(
            CreateUserRequest::decode(&their.to_bytes()).unwrap(),
            request
        );
    }
}

#[test]
fn update_user_request_in_every_shape() {
    for (id, wire_id) in identifiers() {
        for (username, status) in [
            (None, None),
            (Some("alicia"), None),
            (None, Some(UserStatus::Inactive)),
            (Some("bob"), Some(UserStatus::Active)),
        ] {
            let request = UpdateUserRequest {
                user: id.clone(),
                username: username.map(name),
                status,
            };
            let bytes = ours(|o| request.encode(o));
            assert_eq!(bytes.len(), request.encoded_len());
            let their = TUpdateUser {
                user_id: wire_id.clone(),
                username: username.map(wname),
                status: status.map(UserStatus::as_u8),
                options: WireOptions::empty(),
            };
            same(&their, &bytes);
            assert_eq!(
                UpdateUserRequest::decode(&their.to_bytes()).unwrap(),
                request
            );
        }
    }
}

#[test]
fn update_permissions_request() {
    let (ours_permissions, their_permissions) = permissions();
    for (id, wire_id) in identifiers() {
        for (ours_p, theirs_p) in [
            (None, None),
            (
                Some(ours_permissions.clone()),
                Some(their_permissions.clone()),
            ),
        ] {
            let request = UpdatePermissionsRequest {
                user: id.clone(),
                permissions: ours_p,
            };
            let bytes = ours(|o| request.encode(o));
            assert_eq!(bytes.len(), request.encoded_len());
            let their = TUpdatePermissions {
                user_id: wire_id.clone(),
                permissions: theirs_p,
            };
            same(&their, &bytes);
            assert_eq!(
                UpdatePermissionsRequest::decode(&their.to_bytes()).unwrap(),
                request
            );
        }
    }
}

#[test]
fn change_password_request() {
    for (id, wire_id) in identifiers() {
        let request = ChangePasswordRequest::new(id, "old-pass", "new-pass-123").unwrap();
        let bytes = ours(|o| request.encode(o));
        assert_eq!(bytes.len(), request.encoded_len());
        let their = TChangePassword {
            user_id: wire_id,
            current_password: "old-pass".to_owned(),
            new_password: "new-pass-123".to_owned(),
        };
        same(&their, &bytes);
        assert_eq!(
            ChangePasswordRequest::decode(&their.to_bytes()).unwrap(),
            request
        );
    }
}

fn user(id: u32, username: &str, status: UserStatus) -> (UserInfo, TUser) {
    let created_at = 1_700_000_000_123_456 + u64::from(id);
    (
        UserInfo {
            id,
            created_at,
            status,
            username: name(username),
        },
        TUser {
            id,
            created_at,
            status: status.as_u8(),
            username: wname(username),
            options: WireOptions::empty(),
        },
    )
}

#[test]
fn user_details_reply_with_and_without_permissions() {
    let (ours_permissions, their_permissions) = permissions();
    for (ours_p, theirs_p) in [
        (None, None),
        (Some(ours_permissions), Some(their_permissions)),
    ] {
        let (info, their_user) = user(5, "alice", UserStatus::Inactive);
        let details = UserDetails {
            id: info.id,
            created_at: info.created_at,
            status: info.status,
            username: info.username,
            permissions: ours_p,
        };
        let bytes = ours(|o| details.encode(o));
        assert_eq!(bytes.len(), details.encoded_len());
        let their = TDetails {
            user: their_user,
            permissions: theirs_p,
        };
        same(&their, &bytes);
        assert_eq!(UserDetails::decode(&their.to_bytes()).unwrap(), details);
        assert_eq!(
            UserDetails::decode_optional(&their.to_bytes()).unwrap(),
            Some(details)
        );
    }
}

#[test]
fn get_users_reply() {
    let (ours_users, their_users): (Vec<_>, Vec<_>) = [
        user(0, "iggy", UserStatus::Active),
        user(1, "alice", UserStatus::Inactive),
        user(7, "a-much-longer-user-name", UserStatus::Active),
    ]
    .into_iter()
    .unzip();
    let bytes = ours(|o| encode_users(&ours_users, o));
    let their = TUsers { users: their_users };
    same(&their, &bytes);
    assert_eq!(decode_users(&their.to_bytes()).unwrap(), ours_users);
    let empty = TUsers { users: Vec::new() };
    same(&empty, &ours(|o| encode_users(&[], o)));
    assert_eq!(decode_users(&[]).unwrap(), Vec::new());
}

#[test]
fn no_secret_reaches_debug_output() {
    let create =
        CreateUserRequest::new("alice", "create-secret", UserStatus::Active, None).unwrap();
    let change =
        ChangePasswordRequest::new(Identifier::Numeric(1), "current-secret", "next-secret")
            .unwrap();
    let raw = RawPersonalAccessToken {
        token: Password::new("raw-token-secret").unwrap(),
    };
    let debug = format!("{create:?} {change:?} {raw:?}");
    for secret in [
        "create-secret",
        "current-secret",
        "next-secret",
        "raw-token-secret",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
    assert!(debug.contains("***"));
}
