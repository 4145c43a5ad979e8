//! Users, permissions and passwords in the node model, end to end over request frames:
//! what a restricted user is refused (with the server's exact status, on the channel the
//! server uses) and what it may do, and password changes. Tokens are in `tokens_tests.rs`,
//! which shares the helpers here.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::wire::{
    ChangePasswordRequest, CreatePersonalAccessTokenRequest, CreateStreamRequest,
    CreateUserRequest, DeletePersonalAccessTokenRequest, ErrorCode, EvictionReason, GetUserRequest,
    GlobalPermissions, Identifier, LoginRegisterReply, LoginRegisterWithPatRequest, Name,
    Operation, PROTOCOL_VERSION, Password, Permissions, RequestHeader, SDK_NAME, SDK_VERSION,
    StreamPermissions, UpdatePermissionsRequest, UpdateUserRequest, UserDetails, UserStatus, code,
    decode_personal_access_tokens, decode_users,
};

use super::state::ClusterState;
use super::testkit::{Answer, Client, cluster, encode, poll_body, seed_topic, send_body};

pub(super) const UNAUTHORIZED: u32 = 41;

pub(super) fn name(text: &str) -> Name {
    Name::new(text).unwrap()
}

pub(super) fn user_id(text: &str) -> Identifier {
    Identifier::try_from(text).unwrap()
}

pub(super) fn create_user(
    permissions: Option<Permissions>,
    username: &str,
    password: &str,
) -> Bytes {
    let request =
        CreateUserRequest::new(username, password, UserStatus::Active, permissions).unwrap();
    encode(|o| request.encode(o))
}

pub(super) fn create_stream(stream: &str) -> Bytes {
    let request = CreateStreamRequest { name: name(stream) };
    encode(|o| request.encode(o))
}

fn get_user(user: Identifier) -> Bytes {
    encode(|o| GetUserRequest { user }.encode(o))
}

fn update_permissions(user: Identifier, permissions: Option<Permissions>) -> Bytes {
    let request = UpdatePermissionsRequest { user, permissions };
    encode(|o| request.encode(o))
}

fn change_password(user: Identifier, current: &str, new: &str) -> Bytes {
    let request = ChangePasswordRequest::new(user, current, new).unwrap();
    encode(|o| request.encode(o))
}

pub(super) fn create_token(token: &str, expiry: u64) -> Bytes {
    let request = CreatePersonalAccessTokenRequest {
        name: name(token),
        expiry,
    };
    encode(|o| request.encode(o))
}

pub(super) fn delete_token(token: &str) -> Bytes {
    encode(|o| DeletePersonalAccessTokenRequest { name: name(token) }.encode(o))
}

/// A user who may send to stream `stream`, and nothing else.
pub(super) fn sender_on(stream: u32) -> Permissions {
    Permissions {
        global: GlobalPermissions::default(),
        streams: vec![StreamPermissions {
            stream_id: stream,
            send_messages: true,
            ..StreamPermissions::default()
        }],
    }
}

/// Sign in on `node` with a password; panics unless it works.
pub(super) fn signed_in_as(
    state: &mut ClusterState,
    node: usize,
    client_id: u128,
    username: &str,
    password: &str,
) -> Client {
    let mut client = Client::open(state, node, client_id);
    let answer = client.login(state, username, password);
    let reply = LoginRegisterReply::decode(&answer.result_payload()).unwrap();
    client.session = reply.session;
    client
}

/// `LOGIN_REGISTER_WITH_PAT` on a fresh connection.
pub(super) fn pat_login(
    state: &mut ClusterState,
    client_id: u128,
    token: &Password,
) -> (Client, Answer) {
    let mut client = Client::open(state, 0, client_id);
    let request = LoginRegisterWithPatRequest {
        protocol_version: PROTOCOL_VERSION,
        sdk_name: name(SDK_NAME),
        sdk_version: name(SDK_VERSION),
        token: token.clone(),
        context: Bytes::new(),
    };
    let body = encode(|o| request.encode(o));
    let header = RequestHeader::new(Operation::Register, 0, client_id, 0, 0, body.len());
    let answer = client.send_frame(state, header, body);
    if let Answer::Reply { .. } = answer {
        let reply = LoginRegisterReply::decode(&answer.result_payload()).unwrap();
        client.session = reply.session;
    }
    (client, answer)
}

pub(super) fn evicted_with(answer: &Answer) -> EvictionReason {
    match answer {
        Answer::Evicted(eviction) => eviction.reason,
        other @ (Answer::Reply { .. } | Answer::Dropped) => {
            panic!("expected an eviction: {other:?}")
        }
    }
}

/// A fresh 2-node cluster with stream 0 / topic 0 (one partition, led by node 0), a
/// second stream, and user `alice` (id 1) who may only send to stream 0.
pub(super) fn with_alice() -> (ClusterState, Client, u32) {
    let mut state = cluster(2);
    let (stream, _) = seed_topic(&mut state, 1);
    let other = state.catalog.create_stream("other", 1).unwrap();
    state
        .catalog
        .create_topic(super::catalog::Lookup::Id(other), "t", 1, 1, 0)
        .unwrap();
    let mut root = Client::signed_in(&mut state, 0, 1);
    let created = root.write(
        &mut state,
        Operation::CreateUser,
        create_user(Some(sender_on(stream)), "alice", "alice-pw"),
    );
    assert_eq!(created.result_code(), 0);
    let details = UserDetails::decode(&created.result_payload()).unwrap();
    assert_eq!(details.id, 1, "root is user 0, the next user 1");
    assert_eq!(details.username.as_str(), "alice");
    assert_eq!(details.permissions, Some(sender_on(stream)));
    assert_eq!(created.header().commit, state.commit());
    (state, root, other)
}

#[test]
fn a_restricted_user_is_refused_what_it_may_not_do_with_the_servers_codes() {
    let (mut state, _root, other) = with_alice();
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    assert_eq!(state.session(2).unwrap().user_id, 1);

    // Metadata writes: committed rejections, status 0, `[1][0][41]`.
    let commit = state.commit();
    for (operation, body) in [
        (Operation::CreateStream, create_stream("mine")),
        (Operation::UpdateStream, {
            let stream = Identifier::Numeric(0);
            encode(|o| {
                stream.encode(o);
                name("renamed").encode(o);
            })
        }),
        (
            Operation::DeleteStream,
            encode(|o| Identifier::Numeric(0).encode(o)),
        ),
        (
            Operation::CreateUser,
            create_user(None, "mallory", "mallory-pw"),
        ),
        (
            Operation::DeleteUser,
            encode(|o| Identifier::Numeric(0).encode(o)),
        ),
        (
            Operation::UpdatePermissions,
            update_permissions(user_id("alice"), Some(Permissions::all())),
        ),
        (
            Operation::ChangePassword,
            change_password(user_id("iggy"), "iggy", "stolen"),
        ),
    ] {
        let answer = alice.write(&mut state, operation, body);
        assert_eq!(answer.status(), 0, "{operation:?}");
        assert_eq!(answer.result_code(), UNAUTHORIZED, "{operation:?}");
    }
    assert_eq!(
        state
            .catalog
            .stream(super::catalog::Lookup::Id(0))
            .unwrap()
            .name,
        "s"
    );
    assert_eq!(state.commit(), commit, "nothing was applied");

    // Reads and partition ops: status 41 with an empty body.
    let refused = [
        alice.read(&mut state, code::GET_USERS, Bytes::new()),
        alice.read(&mut state, code::GET_USER, get_user(Identifier::Numeric(0))),
        alice.read(&mut state, code::POLL_MESSAGES, poll_body(0, 0, 0, false)),
        alice.write(
            &mut state,
            Operation::SendMessages,
            send_body(other, 0, 0, &["no"]),
        ),
    ];
    for answer in refused {
        assert_eq!(answer.status(), UNAUTHORIZED);
        let Answer::Reply { body, .. } = answer else {
            unreachable!()
        };
        assert!(body.is_empty());
    }

    // What it may do: send to its stream, read itself, list its (no) tokens.
    let sent = alice.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["yes"]),
    );
    assert_eq!(sent.status(), 0);
    assert_eq!(
        state
            .catalog
            .partition(
                super::catalog::Lookup::Id(0),
                super::catalog::Lookup::Id(0),
                0
            )
            .unwrap()
            .next_offset(),
        1
    );
    let me = alice.read(&mut state, code::GET_USER, get_user(user_id("alice")));
    let me = UserDetails::decode(&me.body()).unwrap();
    assert_eq!(me.id, 1);
    let tokens = alice.read(&mut state, code::GET_PERSONAL_ACCESS_TOKENS, Bytes::new());
    assert!(
        decode_personal_access_tokens(&tokens.body())
            .unwrap()
            .is_empty()
    );

    // A not-found comes before the permission check.
    let missing = alice.write(
        &mut state,
        Operation::SendMessages,
        send_body(99, 0, 0, &["x"]),
    );
    assert_eq!(missing.status(), ErrorCode::ResourceNotFound.as_u32());
    let nobody = alice.read(&mut state, code::GET_USER, get_user(user_id("nobody")));
    assert!(
        nobody.body().is_empty(),
        "an unknown user is the SDK's None"
    );
}

#[test]
fn granted_permissions_take_effect_and_followers_refuse_writes_first() {
    let (mut state, mut root, _) = with_alice();
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    let poll = alice.read(&mut state, code::POLL_MESSAGES, poll_body(0, 0, 0, false));
    assert_eq!(poll.status(), UNAUTHORIZED);

    let mut granted = sender_on(0);
    granted.global.manage_streams = true;
    granted.global.read_users = true;
    let answer = root.write(
        &mut state,
        Operation::UpdatePermissions,
        update_permissions(user_id("alice"), Some(granted)),
    );
    assert_eq!(answer.result_code(), 0);
    let poll = alice.read(&mut state, code::POLL_MESSAGES, poll_body(0, 0, 0, false));
    assert_eq!(poll.status(), 0, "manage_streams implies polling");
    let created = alice.write(&mut state, Operation::CreateStream, create_stream("mine"));
    assert_eq!(created.result_code(), 0);
    let users = alice.read(&mut state, code::GET_USERS, Bytes::new());
    let users = decode_users(&users.body()).unwrap();
    let names: Vec<_> = users.iter().map(|u| (u.id, u.username.as_str())).collect();
    assert_eq!(names, [(0, "iggy"), (1, "alice")]);

    // On a follower the write is refused as not admitted, before any permission check.
    let mut on_follower = signed_in_as(&mut state, 1, 3, "alice", "alice-pw");
    for (operation, body) in [
        (Operation::CreateStream, create_stream("x")),
        (Operation::CreateUser, create_user(None, "zed", "zed-pw")),
    ] {
        let answer = on_follower.write(&mut state, operation, body);
        assert_eq!(
            answer.result_code(),
            ErrorCode::TransientNotAccepted.as_u32()
        );
    }
}

#[test]
fn user_commands_answer_with_the_servers_rejections() {
    let (mut state, mut root, _) = with_alice();
    let cases: Vec<(Operation, Bytes, ErrorCode)> = vec![
        (
            Operation::DeleteUser,
            encode(|o| Identifier::Numeric(0).encode(o)),
            ErrorCode::CannotDeleteUser,
        ),
        (
            Operation::UpdatePermissions,
            update_permissions(Identifier::Numeric(0), None),
            ErrorCode::CannotChangePermissions,
        ),
        (
            Operation::CreateUser,
            create_user(None, "alice", "other-pw"),
            ErrorCode::UserAlreadyExists,
        ),
        (
            Operation::UpdateUser,
            encode(|o| {
                UpdateUserRequest {
                    user: user_id("alice"),
                    username: Some(name("iggy")),
                    status: None,
                }
                .encode(o)
            }),
            ErrorCode::UserAlreadyExists,
        ),
        (
            Operation::UpdateUser,
            encode(|o| {
                UpdateUserRequest {
                    user: user_id("alice"),
                    username: Some(name("al")),
                    status: None,
                }
                .encode(o)
            }),
            ErrorCode::InvalidUsername,
        ),
        (
            Operation::DeleteUser,
            encode(|o| Identifier::Numeric(7).encode(o)),
            ErrorCode::ResourceNotFound,
        ),
        (
            Operation::ChangePassword,
            change_password(user_id("nobody"), "abc", "def"),
            ErrorCode::ResourceNotFound,
        ),
        (
            Operation::DeletePersonalAccessToken,
            delete_token("none"),
            ErrorCode::ResourceNotFound,
        ),
    ];
    for (operation, body, code) in cases {
        let answer = root.write(&mut state, operation, body);
        assert_eq!(answer.status(), 0, "{operation:?}");
        assert_eq!(answer.result_code(), code.as_u32(), "{operation:?}");
    }
    // A username the SDK would refuse, sent raw, is refused by the server's apply.
    let raw = encode(|o| {
        name("ab").encode(o);
        o.extend_from_slice(b"\x03pwd\x01\x00");
    });
    let answer = root.write(&mut state, Operation::CreateUser, raw);
    assert_eq!(answer.result_code(), ErrorCode::InvalidUsername.as_u32());
    // A body that does not decode is refused before consensus.
    let answer = root.write(
        &mut state,
        Operation::CreateUser,
        Bytes::from_static(b"\x05ab"),
    );
    assert_eq!(answer.status(), ErrorCode::InvalidCommand.as_u32());

    // Deleting a user reuses its id and leaves its session with no permissions.
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    let deleted = root.write(
        &mut state,
        Operation::DeleteUser,
        encode(|o| user_id("alice").encode(o)),
    );
    assert_eq!(deleted.result_code(), 0);
    let sent = alice.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["x"]),
    );
    assert_eq!(sent.status(), UNAUTHORIZED);
    let bob = root.write(
        &mut state,
        Operation::CreateUser,
        create_user(None, "bob", "bob-pw"),
    );
    assert_eq!(UserDetails::decode(&bob.result_payload()).unwrap().id, 1);
}

#[test]
fn a_changed_password_replaces_the_old_one() {
    let (mut state, mut root, _) = with_alice();
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    // Her own password: no permission needed, but the current one must be right.
    let wrong = alice.write(
        &mut state,
        Operation::ChangePassword,
        change_password(user_id("alice"), "not-it", "next-pw"),
    );
    assert_eq!(wrong.result_code(), ErrorCode::InvalidCredentials.as_u32());
    let changed = alice.write(
        &mut state,
        Operation::ChangePassword,
        change_password(Identifier::Numeric(1), "alice-pw", "next-pw"),
    );
    assert_eq!(changed.result_code(), 0);

    let mut old = Client::open(&mut state, 0, 20);
    let answer = old.login(&mut state, "alice", "alice-pw");
    assert_eq!(evicted_with(&answer), EvictionReason::InvalidCredentials);
    signed_in_as(&mut state, 0, 21, "alice", "next-pw");

    // An administrator changing it must know the current password too.
    let admin_wrong = root.write(
        &mut state,
        Operation::ChangePassword,
        change_password(user_id("alice"), "alice-pw", "third-pw"),
    );
    assert_eq!(
        admin_wrong.result_code(),
        ErrorCode::InvalidCredentials.as_u32()
    );
    let admin = root.write(
        &mut state,
        Operation::ChangePassword,
        change_password(user_id("alice"), "next-pw", "third-pw"),
    );
    assert_eq!(admin.result_code(), 0);
    signed_in_as(&mut state, 1, 22, "alice", "third-pw");
}
