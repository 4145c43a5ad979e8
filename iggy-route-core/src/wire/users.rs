//! User commands: `GET_USER` (31), `CREATE_USER` (33), `DELETE_USER` (34) and
//! `UPDATE_USER` (35) request bodies. `GET_USERS` (32) has an empty body.
//! `UPDATE_PERMISSIONS` (36) is in `permissions.rs`, `CHANGE_PASSWORD` (37) in
//! `passwords.rs`, the replies in `user_details.rs`.
//!
//! Layouts follow the 0.11.0 crate's `requests/users/`. The create and update bodies
//! end in an options block that runs to the end of the body; the SDK always sends it
//! empty (the server refuses every user option key today), so this codec writes none
//! and validates and drops one on decode.
//!
//! Presence flags (`has_permissions`, `has_username`, `has_status`) must be 0 or 1:
//! the crate reads anything but 1 as absent and then misparses the rest, which no
//! encoder produces, so a typed error is the honest answer.

use bytes::{BufMut, BytesMut};

#[cfg(feature = "server")]
use super::passwords::read_secret;
use super::passwords::{put_secret, secret_len, validate_password};
use super::permissions::{optional_permissions_len, put_optional_permissions};
#[cfg(feature = "server")]
use super::permissions::{read_optional_permissions, read_presence};
use super::{Identifier, Name, Password, Permissions, Reader, WireError};
#[cfg(feature = "server")]
use super::{topics::whole_body, validate_user_headers};

/// Shortest username the SDK and the server accept, in bytes.
pub const MIN_USERNAME_LENGTH: usize = 3;
/// Longest username the SDK and the server accept, in bytes.
pub const MAX_USERNAME_LENGTH: usize = 50;
/// Check a username's length as the SDK does before `create_user` and a login
/// (`InvalidUsername` there, a typed [`WireError::InvalidLength`] here).
pub fn validate_username(username: &str) -> Result<(), WireError> {
    check_length(
        "username",
        username,
        MIN_USERNAME_LENGTH,
        MAX_USERNAME_LENGTH,
    )
}

pub(crate) fn check_length(
    field: &'static str,
    text: &str,
    min: usize,
    max: usize,
) -> Result<(), WireError> {
    if (min..=max).contains(&text.len()) {
        Ok(())
    } else {
        Err(WireError::InvalidLength {
            field,
            len: text.len(),
        })
    }
}

/// Whether a user may sign in (`UserStatus` codes of `iggy_common`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum UserStatus {
    /// Code 1: may sign in.
    #[default]
    Active = 1,
    /// Code 2: refused at sign-in.
    Inactive = 2,
}

impl UserStatus {
    /// The wire code.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The status for a wire code; the SDK refuses any other code too.
    pub fn from_u8(code: u8) -> Result<Self, WireError> {
        match code {
            1 => Ok(Self::Active),
            2 => Ok(Self::Inactive),
            other => Err(WireError::InvalidValue {
                field: "user status",
                value: other.into(),
            }),
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Self::from_u8(r.u8()?)
    }
}

#[cfg(feature = "server")]
fn skip_trailing_options(r: &mut Reader<'_>) -> Result<(), WireError> {
    validate_user_headers(r.rest()).map(|_| ())
}

/// The `GET_USER` body, also the `DELETE_USER` body: the user's identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GetUserRequest {
    /// The user, by numeric id or username.
    pub user: Identifier,
}

/// The `DELETE_USER` body: the same single identifier as `GET_USER`.
pub type DeleteUserRequest = GetUserRequest;

impl GetUserRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.user.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.user.encoded_len()
    }
}
#[cfg(feature = "server")]
whole_body!(GetUserRequest, "user request", |r| GetUserRequest {
    user: Identifier::decode(&mut r)?,
});

/// The `CREATE_USER` body. Its `Debug` shows the password as `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateUserRequest {
    /// Username.
    pub username: Name,
    /// Password, in clear (the server hashes it).
    pub password: Password,
    /// Initial status.
    pub status: UserStatus,
    /// Permissions; `None` grants nothing.
    pub permissions: Option<Permissions>,
}

impl CreateUserRequest {
    /// A create-user body, with the username and password checked as the SDK checks
    /// them (3..=50 and 3..=100 bytes).
    pub fn new(
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<Self, WireError> {
        validate_username(username)?;
        validate_password(password)?;
        Ok(Self {
            username: Name::new(username)?,
            password: Password::new(password)?,
            status,
            permissions,
        })
    }

    /// Append the body (with an empty options block, which takes no bytes).
    pub fn encode(&self, out: &mut BytesMut) {
        self.username.encode(out);
        put_secret(&self.password, out);
        out.put_u8(self.status.as_u8());
        put_optional_permissions(self.permissions.as_ref(), out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.username.encoded_len()
            + secret_len(&self.password)
            + 1
            + optional_permissions_len(self.permissions.as_ref())
    }
}
#[cfg(feature = "server")]
impl CreateUserRequest {
    /// Decode a whole body; a trailing options block is validated and dropped.
    /// Lengths are not checked here: that is the server's apply-time answer.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self {
            username: r.name()?,
            password: read_secret(&mut r, "password")?,
            status: UserStatus::read(&mut r)?,
            permissions: read_optional_permissions(&mut r)?,
        };
        skip_trailing_options(&mut r)?;
        Ok(value)
    }
}

/// The `UPDATE_USER` body: what is `Some` changes, the rest stays.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpdateUserRequest {
    /// The user to update.
    pub user: Identifier,
    /// A new username.
    pub username: Option<Name>,
    /// A new status.
    pub status: Option<UserStatus>,
}

impl UpdateUserRequest {
    /// Append the body (with an empty options block, which takes no bytes).
    pub fn encode(&self, out: &mut BytesMut) {
        self.user.encode(out);
        match &self.username {
            Some(name) => {
                out.put_u8(1);
                name.encode(out);
            }
            None => out.put_u8(0),
        }
        match self.status {
            Some(status) => {
                out.put_u8(1);
                out.put_u8(status.as_u8());
            }
            None => out.put_u8(0),
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.user.encoded_len()
            + 1
            + self.username.as_ref().map_or(0, Name::encoded_len)
            + 1
            + usize::from(self.status.is_some())
    }
}
#[cfg(feature = "server")]
impl UpdateUserRequest {
    /// Decode a whole body; a trailing options block is validated and dropped.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let user = Identifier::decode(&mut r)?;
        let username = if read_presence(&mut r, "has username")? {
            Some(r.name()?)
        } else {
            None
        };
        let status = if read_presence(&mut r, "has status")? {
            Some(UserStatus::read(&mut r)?)
        } else {
            None
        };
        skip_trailing_options(&mut r)?;
        Ok(Self {
            user,
            username,
            status,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn bytes(encode: impl FnOnce(&mut BytesMut)) -> BytesMut {
        let mut out = BytesMut::new();
        encode(&mut out);
        out
    }

    #[test]
    fn lengths_are_checked_like_the_sdk() {
        assert!(validate_username("ab").is_err());
        assert!(validate_username("abc").is_ok());
        assert!(validate_username(&"a".repeat(50)).is_ok());
        assert_eq!(
            validate_username(&"a".repeat(51)),
            Err(WireError::InvalidLength {
                field: "username",
                len: 51
            })
        );
        assert!(CreateUserRequest::new("ab", "secret", UserStatus::Active, None).is_err());
        assert!(CreateUserRequest::new("abc", "pw", UserStatus::Active, None).is_err());
    }

    #[test]
    fn create_user_round_trips_with_and_without_permissions() {
        for permissions in [None, Some(Permissions::all())] {
            let request =
                CreateUserRequest::new("alice", "s3cret", UserStatus::Inactive, permissions)
                    .unwrap();
            let out = bytes(|o| request.encode(o));
            assert_eq!(out.len(), request.encoded_len());
            assert_eq!(CreateUserRequest::decode(&out).unwrap(), request);
            for cut in 0..out.len() {
                assert!(CreateUserRequest::decode(&out[..cut]).is_err());
            }
        }
        let request = CreateUserRequest::new("bob", "pw123", UserStatus::Active, None).unwrap();
        let out = bytes(|o| request.encode(o));
        assert_eq!(&out[..], b"\x03bob\x05pw123\x01\x00");
        assert!(
            !format!("{request:?}").contains("pw123"),
            "Debug hides the password"
        );
        let mut with_options = out.to_vec();
        with_options.extend_from_slice(&[2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v']);
        assert_eq!(CreateUserRequest::decode(&with_options).unwrap(), request);
        with_options.push(9);
        assert!(CreateUserRequest::decode(&with_options).is_err());
    }

    #[test]
    fn garbage_flags_and_statuses_are_typed_errors() {
        // has_permissions = 2.
        assert!(matches!(
            CreateUserRequest::decode(b"\x03bob\x03pwd\x01\x02"),
            Err(WireError::InvalidValue { .. })
        ));
        // status = 3.
        assert!(CreateUserRequest::decode(b"\x03bob\x03pwd\x03\x00").is_err());
        // Permissions length beyond the body.
        assert!(CreateUserRequest::decode(b"\x03bob\x03pwd\x01\x01\xff\xff\xff\xff").is_err());
        // Invalid UTF-8 password.
        assert!(CreateUserRequest::decode(b"\x03bob\x01\xff\x01\x00").is_err());
        let update = [1, 4, 1, 0, 0, 0, 1, 0];
        assert!(UpdateUserRequest::decode(&update).is_err());
    }

    #[test]
    fn update_requests_round_trip() {
        let update = UpdateUserRequest {
            user: Identifier::try_from("alice").unwrap(),
            username: Some(Name::new("alicia").unwrap()),
            status: Some(UserStatus::Inactive),
        };
        let out = bytes(|o| update.encode(o));
        assert_eq!(out.len(), update.encoded_len());
        assert_eq!(UpdateUserRequest::decode(&out).unwrap(), update);
        let none = UpdateUserRequest {
            user: 7.into(),
            username: None,
            status: None,
        };
        let out = bytes(|o| none.encode(o));
        assert_eq!(&out[..], &[1, 4, 7, 0, 0, 0, 0, 0]);
        assert_eq!(UpdateUserRequest::decode(&out).unwrap(), none);

        let get = GetUserRequest { user: 9.into() };
        let out = bytes(|o| get.encode(o));
        assert_eq!(out.len(), get.encoded_len());
        assert_eq!(DeleteUserRequest::decode(&out).unwrap(), get);
    }
}
