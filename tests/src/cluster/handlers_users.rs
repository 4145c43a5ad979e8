//! The user family: `GET_USER` (31), `GET_USERS` (32), `CREATE_USER` (33),
//! `DELETE_USER` (34), `UPDATE_USER` (35), `UPDATE_PERMISSIONS` (36), `CHANGE_PASSWORD`
//! (37), `GET_PERSONAL_ACCESS_TOKENS` (41), `CREATE_PERSONAL_ACCESS_TOKEN` (42) and
//! `DELETE_PERSONAL_ACCESS_TOKEN` (43), answered as a 0.11.0 server answers them.
//!
//! Reads are served by any node. `GET_USER` of oneself needs no permission, of another
//! user `read_users`, as does `GET_USERS`; a denial is status 41. An unknown user is an
//! empty body (the SDK's `None`).
//!
//! Writes are replicated metadata ops: only the metadata leader admits them (any other
//! node refuses with a result-section 58, as for streams). The permission gate
//! ([`super::authz`]) has run by then. A body that does not decode is refused before
//! consensus with status `InvalidCommand (3)`, as the server's password and token
//! rewrites refuse it; so is a token create past [`MAX_TOKENS_PER_USER`] (status 52). A
//! committed rejection rides the result section: an unknown user or token is
//! `ResourceNotFound (20)`. The create-user payload is the new user's details, the
//! create-token payload the raw token.

use bytes::BytesMut;
use iggy_route_core::wire::{
    ChangePasswordRequest, CreatePersonalAccessTokenRequest, CreateUserRequest,
    DeletePersonalAccessTokenRequest, DeleteUserRequest, ErrorCode, EvictionReason, GetUserRequest,
    Identifier, Operation, RawPersonalAccessToken, UpdatePermissionsRequest, UpdateUserRequest,
    UserDetails, UserInfo, code, encode_personal_access_tokens, encode_users,
};

use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId};
use super::users::{MAX_TOKENS_PER_USER, User, token_info};

fn details(user: &User) -> Option<UserDetails> {
    Some(UserDetails {
        id: user.id,
        created_at: user.created_at,
        status: user.status,
        username: iggy_route_core::wire::Name::new(user.username.as_str()).ok()?,
        permissions: user.permissions.clone(),
    })
}

/// `GET_USER`, `GET_USERS` or `GET_PERSONAL_ACCESS_TOKENS` on a signed-in `connection`.
pub(super) fn read(
    connection: &NodeConnection,
    state: &ClusterState,
    command: u32,
    body: &[u8],
) -> Outcome {
    let node = connection.node();
    let Some(binding) = connection.binding() else {
        return Outcome::status(ErrorCode::Unauthenticated, state.commit_seen_by(node));
    };
    match command {
        code::GET_USER => get_user(node, state, binding.user_id, body),
        code::GET_USERS => get_users(node, state, binding.user_id),
        _ => get_tokens(node, state, binding.user_id),
    }
}

/// `GET_USER` by `caller` on `node`.
fn get_user(node: NodeId, state: &ClusterState, caller: u32, body: &[u8]) -> Outcome {
    let commit = state.commit_seen_by(node);
    let Ok(request) = GetUserRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidCommand, commit);
    };
    let users = state.users();
    let Some(target) = users.resolve(&request.user) else {
        return Outcome::empty(commit);
    };
    if target != caller
        && let Err(code) = users.permissioner(caller).read_users()
    {
        return Outcome::status(code, commit);
    }
    let Some(found) = users.get(target).and_then(details) else {
        return Outcome::empty(commit);
    };
    let mut out = BytesMut::with_capacity(found.encoded_len());
    found.encode(&mut out);
    Outcome::ok(out.freeze(), commit)
}

/// `GET_USERS` by `caller` on `node`: every user, by id.
fn get_users(node: NodeId, state: &ClusterState, caller: u32) -> Outcome {
    let commit = state.commit_seen_by(node);
    let users = state.users();
    if let Err(code) = users.permissioner(caller).read_users() {
        return Outcome::status(code, commit);
    }
    let listed: Vec<UserInfo> = users
        .all()
        .filter_map(details)
        .map(|found| found.info())
        .collect();
    let mut out = BytesMut::new();
    encode_users(&listed, &mut out);
    Outcome::ok(out.freeze(), commit)
}

/// `GET_PERSONAL_ACCESS_TOKENS`: the caller's own tokens, by name.
fn get_tokens(node: NodeId, state: &ClusterState, caller: u32) -> Outcome {
    let commit = state.commit_seen_by(node);
    let tokens: Vec<_> = state
        .users()
        .tokens_of(caller)
        .into_iter()
        .filter_map(|(name, expiry_at)| token_info(&name, expiry_at))
        .collect();
    let mut out = BytesMut::new();
    encode_personal_access_tokens(&tokens, &mut out);
    Outcome::ok(out.freeze(), commit)
}

/// Why a write did not apply.
enum Refusal {
    /// Refused before consensus: status channel.
    Denied(ErrorCode),
    /// Committed as a rejection: result section.
    Rejected(ErrorCode),
}

/// A user or token write received on `connection`, by its signed-in user.
pub(super) fn write(
    connection: &NodeConnection,
    state: &mut ClusterState,
    operation: Operation,
    body: &[u8],
) -> Outcome {
    // `check_session` has bound the connection before any replicated op gets here.
    let Some(binding) = connection.binding() else {
        return Outcome::Evict(EvictionReason::NoSession);
    };
    let caller = binding.user_id;
    if connection.node() != state.metadata_leader() {
        return Outcome::result_rejected(ErrorCode::TransientNotAccepted, state.commit());
    }
    match apply(state, caller, operation, body) {
        Ok(payload) => {
            let commit = state.bump_commit();
            Outcome::result_ok(&payload, commit)
        }
        Err(Refusal::Denied(code)) => Outcome::status(code, state.commit()),
        Err(Refusal::Rejected(code)) => Outcome::result_rejected(code, state.commit()),
    }
}

fn malformed<E>(_: E) -> Refusal {
    Refusal::Denied(ErrorCode::InvalidCommand)
}

fn target(state: &ClusterState, user: &Identifier) -> Result<u32, Refusal> {
    state
        .users()
        .resolve(user)
        .ok_or(Refusal::Rejected(ErrorCode::ResourceNotFound))
}

#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "node.rs sends only the user and token operations here; any other is a bug \
              answered like an unknown command"
)]
fn apply(
    state: &mut ClusterState,
    caller: u32,
    operation: Operation,
    body: &[u8],
) -> Result<BytesMut, Refusal> {
    match operation {
        Operation::CreateUser => {
            let request = CreateUserRequest::decode(body).map_err(malformed)?;
            let now = state.next_timestamp();
            let user = state
                .users_mut()
                .create(
                    request.username.as_str(),
                    request.password,
                    request.status,
                    request.permissions,
                    now,
                )
                .map_err(Refusal::Rejected)?;
            let created = details(user).ok_or(Refusal::Rejected(ErrorCode::InvalidUsername))?;
            let mut out = BytesMut::with_capacity(created.encoded_len());
            created.encode(&mut out);
            Ok(out)
        }
        Operation::UpdateUser => {
            let request = UpdateUserRequest::decode(body).map_err(malformed)?;
            let id = target(state, &request.user)?;
            let username = request.username.as_ref().map(|name| name.as_str());
            let before = sign_in_of(state, id);
            state
                .users_mut()
                .update(id, username, request.status)
                .map_err(Refusal::Rejected)?;
            if let (Some((name, password)), Some(_)) = (before, username) {
                state.sign_in_replaced(id, &name, &password);
            }
            Ok(BytesMut::new())
        }
        Operation::DeleteUser => {
            let request = DeleteUserRequest::decode(body).map_err(malformed)?;
            let id = target(state, &request.user)?;
            state.users_mut().delete(id).map_err(Refusal::Rejected)?;
            Ok(BytesMut::new())
        }
        Operation::UpdatePermissions => {
            let request = UpdatePermissionsRequest::decode(body).map_err(malformed)?;
            let id = target(state, &request.user)?;
            state
                .users_mut()
                .set_permissions(id, request.permissions)
                .map_err(Refusal::Rejected)?;
            Ok(BytesMut::new())
        }
        Operation::ChangePassword => {
            let request = ChangePasswordRequest::decode(body).map_err(malformed)?;
            let id = target(state, &request.user)?;
            let before = sign_in_of(state, id);
            state
                .users_mut()
                .change_password(id, &request.current_password, request.new_password)
                .map_err(Refusal::Rejected)?;
            if let Some((name, password)) = before {
                state.sign_in_replaced(id, &name, &password);
            }
            Ok(BytesMut::new())
        }
        Operation::CreatePersonalAccessToken => {
            let request = CreatePersonalAccessTokenRequest::decode(body).map_err(malformed)?;
            // The cap is checked on ingress, before consensus, and counts every token the
            // user holds.
            if state.users().token_count(caller) >= MAX_TOKENS_PER_USER {
                return Err(Refusal::Denied(ErrorCode::PersonalAccessTokensLimitReached));
            }
            let now = state.next_timestamp();
            let token = state
                .users_mut()
                .create_token(caller, request.name.as_str(), request.expiry, now)
                .map_err(Refusal::Rejected)?;
            let raw = RawPersonalAccessToken { token };
            let mut out = BytesMut::with_capacity(raw.encoded_len());
            raw.encode(&mut out);
            Ok(out)
        }
        Operation::DeletePersonalAccessToken => {
            let request = DeletePersonalAccessTokenRequest::decode(body).map_err(malformed)?;
            state
                .users_mut()
                .delete_token(caller, request.name.as_str())
                .map_err(Refusal::Rejected)?;
            Ok(BytesMut::new())
        }
        _ => Err(Refusal::Denied(ErrorCode::InvalidCommand)),
    }
}

/// The username and password `id` signs in with now, before a change replaces them.
fn sign_in_of(state: &ClusterState, id: u32) -> Option<(String, iggy_route_core::wire::Password)> {
    state
        .users()
        .get(id)
        .map(|user| (user.username.clone(), user.password.clone()))
}
