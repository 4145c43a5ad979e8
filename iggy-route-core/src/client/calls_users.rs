//! Users, permissions, passwords and personal access tokens as [`Call`]s, with the SDK's
//! `UserClient` / `PersonalAccessTokenClient` names (commands 31-37 and 41-43).
//!
//! Reads (`GET_USER`, `GET_USERS`, `GET_PERSONAL_ACCESS_TOKENS`) go to the metadata read
//! plane; every write is a replicated metadata op for the metadata leader. Sign-in
//! (`login_user`, `login_with_personal_access_token`) is not here: credentials are the
//! client's configuration, used by every link it opens.
//!
//! Arguments are checked as the SDK checks them before sending: the username and password
//! of `create_user` and both passwords of `change_password` by length, names by the
//! 1..=255 bytes the wire carries. Nothing else is checked here; the server answers the
//! rest with its own codes.

use bytes::{Bytes, BytesMut};

use super::{Call, ClientError, identifier};
use crate::Plane;
use crate::wire::{
    ChangePasswordRequest, CreatePersonalAccessTokenRequest, CreateUserRequest,
    DeletePersonalAccessTokenRequest, DeleteUserRequest, GetUserRequest, Identifier, Name,
    Password, Permissions, PersonalAccessTokenInfo, RawPersonalAccessToken, TokenExpiry,
    UpdatePermissionsRequest, UpdateUserRequest, UserDetails, UserInfo, UserStatus, WireError,
    code, decode_personal_access_tokens, decode_users, validate_username,
};

fn body(encoded_len: usize, encode: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(encoded_len);
    encode(&mut out);
    out.freeze()
}

/// A write's reply payload is not read: the SDK ignores it too.
fn ignore_payload(_payload: &[u8]) -> Result<(), WireError> {
    Ok(())
}

/// The SDK lists users by id, whatever order the server wrote them in.
fn users_by_id(payload: &[u8]) -> Result<Vec<UserInfo>, WireError> {
    let mut users = decode_users(payload)?;
    users.sort_by_key(|user| user.id);
    Ok(users)
}

/// The SDK lists tokens by name.
fn tokens_by_name(payload: &[u8]) -> Result<Vec<PersonalAccessTokenInfo>, WireError> {
    let mut tokens = decode_personal_access_tokens(payload)?;
    tokens.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tokens)
}

fn raw_token(payload: &[u8]) -> Result<Password, WireError> {
    RawPersonalAccessToken::decode(payload).map(|raw| raw.token)
}

fn user_request(
    user: impl TryInto<Identifier, Error: Into<ClientError>>,
) -> Result<GetUserRequest, ClientError> {
    Ok(GetUserRequest {
        user: identifier(user)?,
    })
}

impl Call<Option<UserDetails>> {
    /// A user with its permissions, or `None` when there is no such user.
    pub fn get_user(
        user: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = user_request(user)?;
        Ok(Self::command(
            "get user",
            code::GET_USER,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataRead,
            UserDetails::decode_optional,
        ))
    }
}

impl Call<Vec<UserInfo>> {
    /// Every user, by id.
    pub fn get_users() -> Self {
        Self::command(
            "get users",
            code::GET_USERS,
            Bytes::new(),
            Plane::MetadataRead,
            users_by_id,
        )
    }
}

impl Call<UserDetails> {
    /// Creates a user; `permissions: None` grants nothing. The username must be 3..=50
    /// bytes and the password 3..=100, as the SDK requires.
    pub fn create_user(
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<Self, ClientError> {
        let request = CreateUserRequest::new(username, password, status, permissions)?;
        Ok(Self::command(
            "create user",
            code::CREATE_USER,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            UserDetails::decode,
        ))
    }
}

impl Call<()> {
    /// Deletes a user (the root user cannot be deleted).
    pub fn delete_user(
        user: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request: DeleteUserRequest = user_request(user)?;
        Ok(Self::command(
            "delete user",
            code::DELETE_USER,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            ignore_payload,
        ))
    }

    /// Renames a user and/or changes its status; `None` leaves a field as it is. The
    /// SDK's fourth argument, user options, is not taken: a 0.11.0 server refuses every
    /// user option key, so this sends the empty block the SDK sends by default.
    pub fn update_user(
        user: impl TryInto<Identifier, Error: Into<ClientError>>,
        username: Option<&str>,
        status: Option<UserStatus>,
    ) -> Result<Self, ClientError> {
        if let Some(username) = username {
            validate_username(username)?;
        }
        let request = UpdateUserRequest {
            user: identifier(user)?,
            username: username.map(Name::new).transpose()?,
            status,
        };
        Ok(Self::command(
            "update user",
            code::UPDATE_USER,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            ignore_payload,
        ))
    }

    /// Replaces a user's permissions whole; `None` removes them all.
    pub fn update_permissions(
        user: impl TryInto<Identifier, Error: Into<ClientError>>,
        permissions: Option<Permissions>,
    ) -> Result<Self, ClientError> {
        let request = UpdatePermissionsRequest {
            user: identifier(user)?,
            permissions,
        };
        Ok(Self::command(
            "update permissions",
            code::UPDATE_PERMISSIONS,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            ignore_payload,
        ))
    }

    /// Changes a user's password. The server checks `current_password` even when an
    /// administrator changes another user's; both must be 3..=100 bytes.
    pub fn change_password(
        user: impl TryInto<Identifier, Error: Into<ClientError>>,
        current_password: &str,
        new_password: &str,
    ) -> Result<Self, ClientError> {
        let request =
            ChangePasswordRequest::new(identifier(user)?, current_password, new_password)?;
        Ok(Self::command(
            "change password",
            code::CHANGE_PASSWORD,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            ignore_payload,
        ))
    }

    /// Deletes one of the session user's personal access tokens, by name.
    pub fn delete_personal_access_token(name: &str) -> Result<Self, ClientError> {
        let request = DeletePersonalAccessTokenRequest {
            name: Name::new(name)?,
        };
        Ok(Self::command(
            "delete personal access token",
            code::DELETE_PERSONAL_ACCESS_TOKEN,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            ignore_payload,
        ))
    }
}

impl Call<Vec<PersonalAccessTokenInfo>> {
    /// The session user's personal access tokens (names and expiries), by name.
    pub fn get_personal_access_tokens() -> Self {
        Self::command(
            "get personal access tokens",
            code::GET_PERSONAL_ACCESS_TOKENS,
            Bytes::new(),
            Plane::MetadataRead,
            tokens_by_name,
        )
    }
}

impl Call<Password> {
    /// Creates a personal access token for the session user and answers with the token
    /// itself, which the server shows this once. It is a [`Password`]: its `Debug` and
    /// `Display` print `***`.
    pub fn create_personal_access_token(
        name: &str,
        expiry: TokenExpiry,
    ) -> Result<Self, ClientError> {
        let request = CreatePersonalAccessTokenRequest {
            name: Name::new(name)?,
            expiry: expiry.as_micros(),
        };
        Ok(Self::command(
            "create personal access token",
            code::CREATE_PERSONAL_ACCESS_TOKEN,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            raw_token,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::wire::{PersonalAccessTokenInfo, encode_personal_access_tokens, encode_users};
    use crate::{CommandRequest, Reply, ReplyPayload, Request, RequestError};

    fn command<T>(call: &Call<T>) -> &CommandRequest {
        let Request::Command(command) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        command
    }

    fn answer<T>(call: Call<T>, payload: &[u8]) -> Result<T, ClientError> {
        call.reply
            .extract(Reply::Payload(ReplyPayload(Bytes::copy_from_slice(
                payload,
            ))))
    }

    fn info(id: u32, username: &str) -> UserInfo {
        UserInfo {
            id,
            created_at: 1,
            status: UserStatus::Active,
            username: Name::new(username).unwrap(),
        }
    }

    #[test]
    fn reads_go_to_the_metadata_read_plane_and_decode_like_the_sdk() {
        let call = Call::get_user("alice").unwrap();
        let request = command(&call);
        assert_eq!(request.code, code::GET_USER);
        assert_eq!(request.plane, Plane::MetadataRead);
        assert_eq!(&request.body[..], b"\x02\x05alice");
        assert_eq!(answer(call, &[]).unwrap(), None);

        let call = Call::get_user(7u32).unwrap();
        assert_eq!(&command(&call).body[..], &[1, 4, 7, 0, 0, 0]);
        let details = UserDetails {
            id: 7,
            created_at: 2,
            status: UserStatus::Inactive,
            username: Name::new("bob").unwrap(),
            permissions: Some(Permissions::all()),
        };
        let mut payload = BytesMut::new();
        details.encode(&mut payload);
        assert_eq!(answer(call, &payload).unwrap(), Some(details));

        let call = Call::get_users();
        assert_eq!(command(&call).code, code::GET_USERS);
        assert!(command(&call).body.is_empty());
        let mut payload = BytesMut::new();
        encode_users(&[info(3, "zed"), info(0, "iggy")], &mut payload);
        let users = answer(call, &payload).unwrap();
        assert_eq!(users.iter().map(|u| u.id).collect::<Vec<_>>(), [0, 3]);

        let call = Call::get_personal_access_tokens();
        assert_eq!(command(&call).code, code::GET_PERSONAL_ACCESS_TOKENS);
        assert_eq!(command(&call).plane, Plane::MetadataRead);
        let tokens = ["b", "a"].map(|name| PersonalAccessTokenInfo {
            name: Name::new(name).unwrap(),
            expiry_at: 0,
        });
        let mut payload = BytesMut::new();
        encode_personal_access_tokens(&tokens, &mut payload);
        let listed = answer(call, &payload).unwrap();
        assert_eq!(listed[0].name.as_str(), "a");
    }

    #[test]
    fn writes_go_to_the_metadata_write_plane() {
        let calls: Vec<(Call<()>, u32)> = vec![
            (Call::delete_user(3u32).unwrap(), code::DELETE_USER),
            (
                Call::update_user("alice", Some("alicia"), Some(UserStatus::Inactive)).unwrap(),
                code::UPDATE_USER,
            ),
            (
                Call::update_permissions(3u32, None).unwrap(),
                code::UPDATE_PERMISSIONS,
            ),
            (
                Call::change_password(3u32, "old-pw", "new-pw").unwrap(),
                code::CHANGE_PASSWORD,
            ),
            (
                Call::delete_personal_access_token("ci").unwrap(),
                code::DELETE_PERSONAL_ACCESS_TOKEN,
            ),
        ];
        for (call, expected) in calls {
            assert_eq!(command(&call).code, expected);
            assert_eq!(command(&call).plane, Plane::MetadataWrite);
            assert!(answer(call, &[]).is_ok());
        }
        let create = Call::create_user("alice", "secret", UserStatus::Active, None).unwrap();
        assert_eq!(command(&create).code, code::CREATE_USER);
        assert_eq!(command(&create).plane, Plane::MetadataWrite);
        assert!(matches!(
            answer(create, &[1, 2]),
            Err(ClientError::Request(RequestError::Malformed(_)))
        ));
    }

    #[test]
    fn arguments_are_checked_like_the_sdk() {
        let short = Call::create_user("al", "secret", UserStatus::Active, None);
        assert!(matches!(
            short,
            Err(ClientError::Invalid(WireError::InvalidLength {
                field: "username",
                len: 2
            }))
        ));
        let long_password = "p".repeat(101);
        assert!(Call::create_user("alice", &long_password, UserStatus::Active, None).is_err());
        assert!(Call::change_password(1u32, "ok-pw", "no").is_err());
        assert!(Call::change_password(1u32, "no", "ok-pw").is_err());
        assert!(Call::get_user("").is_err());
        assert!(Call::update_user(1u32, Some(""), None).is_err());
        // The SDK checks a new username as it checks a created one (3..=50 bytes).
        for bad in ["al".to_owned(), "u".repeat(51)] {
            assert!(matches!(
                Call::update_user(1u32, Some(&bad), None),
                Err(ClientError::Invalid(WireError::InvalidLength {
                    field: "username",
                    ..
                }))
            ));
        }
        assert!(Call::update_user(1u32, Some(&"u".repeat(50)), None).is_ok());
        assert!(Call::update_user(1u32, None, Some(UserStatus::Inactive)).is_ok());
        assert!(Call::create_personal_access_token("", TokenExpiry::Never).is_err());
        assert!(Call::delete_personal_access_token(&"n".repeat(256)).is_err());
    }

    #[test]
    fn a_created_token_comes_back_as_a_password_and_never_prints() {
        let expiry = TokenExpiry::After(Duration::from_secs(60));
        let call = Call::create_personal_access_token("ci", expiry).unwrap();
        assert_eq!(command(&call).code, code::CREATE_PERSONAL_ACCESS_TOKEN);
        assert_eq!(command(&call).plane, Plane::MetadataWrite);
        assert_eq!(&command(&call).body[3..], &60_000_000u64.to_le_bytes());
        let token = answer(call, b"\x0ctoken-secret").unwrap();
        assert_eq!(token.expose(), "token-secret");
        assert!(!format!("{token:?}").contains("token-secret"));

        // Nor does a call that carries a password print it.
        let create = Call::create_user("alice", "user-secret", UserStatus::Active, None).unwrap();
        let change = Call::change_password("alice", "old-secret", "new-secret").unwrap();
        let debug = format!("{create:?} {change:?}");
        for secret in ["user-secret", "old-secret", "new-secret"] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }
}
