//! Personal access tokens in the node model, end to end over request frames: a token
//! signs in as the user that created it and acts as that user, until it is deleted or
//! expires; the per-user cap; an inactive user's token.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::wire::{
    ErrorCode, EvictionReason, LoginRegisterReply, Operation, Password, RawPersonalAccessToken,
    UpdateUserRequest, UserStatus, code, decode_personal_access_tokens,
};

use super::testkit::{Answer, Client, encode, send_body};
use super::users_tests::{
    UNAUTHORIZED, create_stream, create_token, delete_token, evicted_with, pat_login, signed_in_as,
    user_id, with_alice,
};

#[test]
fn a_token_signs_in_as_its_user_until_it_is_deleted() {
    let (mut state, _root, _) = with_alice();
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    let created = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("ci", u64::MAX),
    );
    assert_eq!(created.result_code(), 0);
    let token = RawPersonalAccessToken::decode(&created.result_payload())
        .unwrap()
        .token;
    let duplicate = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("ci", 0),
    );
    assert_eq!(
        duplicate.result_code(),
        ErrorCode::PersonalAccessTokenAlreadyExists.as_u32()
    );

    // The token signs in as alice, and acts as her.
    let (mut by_token, answer) = pat_login(&mut state, 10, &token);
    let reply = LoginRegisterReply::decode(&answer.result_payload()).unwrap();
    assert_eq!(reply.user_id, 1);
    assert_eq!(state.session(10).unwrap().user_id, 1);
    let refused = by_token.write(&mut state, Operation::CreateStream, create_stream("x"));
    assert_eq!(refused.result_code(), UNAUTHORIZED);
    let sent = by_token.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["pat"]),
    );
    assert_eq!(sent.status(), 0);
    let listed = by_token.read(&mut state, code::GET_PERSONAL_ACCESS_TOKENS, Bytes::new());
    let listed = decode_personal_access_tokens(&listed.body()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].expires_at()),
        ("ci", None)
    );

    // Deleted, it no longer signs in; an unknown token never did.
    let deleted = alice.write(
        &mut state,
        Operation::DeletePersonalAccessToken,
        delete_token("ci"),
    );
    assert_eq!(deleted.result_code(), 0);
    let (_, answer) = pat_login(&mut state, 11, &token);
    assert_eq!(evicted_with(&answer), EvictionReason::InvalidToken);
    let (_, answer) = pat_login(&mut state, 12, &Password::new("made-up").unwrap());
    assert_eq!(evicted_with(&answer), EvictionReason::InvalidToken);
    assert_eq!(state.session(11), None);
}

#[test]
fn tokens_expire_and_are_capped_and_an_inactive_users_token_is_refused() {
    let (mut state, mut root, _) = with_alice();
    state.set_now_micros(1_000_000_000);
    let mut alice = signed_in_as(&mut state, 0, 2, "alice", "alice-pw");
    let created = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("short", 1_000_000),
    );
    let token = RawPersonalAccessToken::decode(&created.result_payload())
        .unwrap()
        .token;
    let (_, answer) = pat_login(&mut state, 10, &token);
    assert!(matches!(answer, Answer::Reply { .. }));
    state.set_now_micros(1_002_000_000);
    let (_, answer) = pat_login(&mut state, 11, &token);
    assert_eq!(evicted_with(&answer), EvictionReason::InvalidToken);

    let overflow = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("overflow", u64::MAX - 1),
    );
    assert_eq!(
        overflow.result_code(),
        ErrorCode::InvalidPersonalAccessTokenExpiry.as_u32()
    );

    // The cap: the 101st token is refused before consensus, on the status channel.
    for index in 1..100 {
        let answer = alice.write(
            &mut state,
            Operation::CreatePersonalAccessToken,
            create_token(&format!("t{index}"), 0),
        );
        assert_eq!(answer.result_code(), 0);
    }
    let over = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("one-too-many", 0),
    );
    assert_eq!(
        over.status(),
        ErrorCode::PersonalAccessTokensLimitReached.as_u32()
    );

    // An inactive user: its token is `UserInactive`, its password `InvalidCredentials`.
    let never = alice.write(
        &mut state,
        Operation::DeletePersonalAccessToken,
        delete_token("t1"),
    );
    assert_eq!(never.result_code(), 0);
    let created = alice.write(
        &mut state,
        Operation::CreatePersonalAccessToken,
        create_token("again", 0),
    );
    let token = RawPersonalAccessToken::decode(&created.result_payload())
        .unwrap()
        .token;
    let deactivate = encode(|o| {
        UpdateUserRequest {
            user: user_id("alice"),
            username: None,
            status: Some(UserStatus::Inactive),
        }
        .encode(o)
    });
    assert_eq!(
        root.write(&mut state, Operation::UpdateUser, deactivate)
            .result_code(),
        0
    );
    let (_, answer) = pat_login(&mut state, 12, &token);
    assert_eq!(evicted_with(&answer), EvictionReason::UserInactive);
    let mut again = Client::open(&mut state, 0, 13);
    let answer = again.login(&mut state, "alice", "alice-pw");
    assert_eq!(evicted_with(&answer), EvictionReason::InvalidCredentials);
}
