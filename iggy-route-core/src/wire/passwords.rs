//! Passwords on the wire: the SDK's length rule, the `[len:u8][utf8]` form secrets take
//! in request and reply bodies, and the `CHANGE_PASSWORD` (37) body.
//!
//! A secret is read straight into a [`Password`] and written from one, so no body type
//! ever holds it where a derived `Debug` would print it.

use bytes::{BufMut, BytesMut};

use super::permissions::read_presence;
#[cfg(feature = "server")]
use super::topics::whole_body;
use super::users::check_length;
use super::{Identifier, Name, Password, Reader, WireError, code};

/// Shortest password the SDK and the server accept, in bytes.
pub const MIN_PASSWORD_LENGTH: usize = 3;
/// Longest password the SDK and the server accept, in bytes.
pub const MAX_PASSWORD_LENGTH: usize = 100;

/// Check a password's length as the SDK does before `create_user` and
/// `change_password` (`InvalidPassword` there). The length is not secret; the
/// error never carries the password itself.
pub fn validate_password(password: &str) -> Result<(), WireError> {
    check_length(
        "password",
        password,
        MIN_PASSWORD_LENGTH,
        MAX_PASSWORD_LENGTH,
    )
}

/// Append a secret as `[len:u8][utf8]`.
pub(crate) fn put_secret(secret: &Password, out: &mut BytesMut) {
    let bytes = secret.expose().as_bytes();
    // Invariant: a `Password` holds at most 255 bytes.
    out.put_u8(bytes.len() as u8);
    out.put_slice(bytes);
}

/// Read a `[len:u8][utf8]` secret straight into a [`Password`], so it is never held
/// in a type whose `Debug` would print it.
pub(crate) fn read_secret(r: &mut Reader<'_>, field: &'static str) -> Result<Password, WireError> {
    let len = r.u8()? as usize;
    let text = std::str::from_utf8(r.bytes(len)?).map_err(|_| WireError::InvalidUtf8 { field })?;
    Password::new(text)
}

pub(crate) fn secret_len(secret: &Password) -> usize {
    1 + secret.expose().len()
}

/// The `CHANGE_PASSWORD` body. Its `Debug` shows both passwords as `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePasswordRequest {
    /// The user whose password changes.
    pub user: Identifier,
    /// The password it has now (the server checks it, even for an admin).
    pub current_password: Password,
    /// The password it gets.
    pub new_password: Password,
}

impl ChangePasswordRequest {
    /// A change-password body, with both passwords checked as the SDK checks them.
    pub fn new(
        user: Identifier,
        current_password: &str,
        new_password: &str,
    ) -> Result<Self, WireError> {
        validate_password(current_password)?;
        validate_password(new_password)?;
        Ok(Self {
            user,
            current_password: Password::new(current_password)?,
            new_password: Password::new(new_password)?,
        })
    }

    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.user.encode(out);
        put_secret(&self.current_password, out);
        put_secret(&self.new_password, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.user.encoded_len()
            + secret_len(&self.current_password)
            + secret_len(&self.new_password)
    }
}
/// What a `CHANGE_PASSWORD` or `UPDATE_USER` body changes of its user's sign-in: a new
/// password, a new name. Read by the router after the server committed the command, so
/// that its own sign-ins follow a change of the signed-in user.
#[derive(Debug)]
pub(crate) struct AccountChange {
    /// The user changed.
    pub(crate) user: Identifier,
    /// Its new name, if the command renames it.
    pub(crate) username: Option<Name>,
    /// Its new password, if the command sets one.
    pub(crate) password: Option<Password>,
}

impl AccountChange {
    /// The sign-in change `body` of command `code` makes; `None` for any other command, a
    /// change of neither name nor password (a status), or a body that does not decode.
    /// Only the fields up to the change are read: what follows (a status, an options
    /// block) decides nothing here.
    pub(crate) fn read(code: u32, body: &[u8]) -> Option<Self> {
        let mut r = Reader::new(body);
        let change = match code {
            code::CHANGE_PASSWORD => {
                let user = Identifier::decode(&mut r).ok()?;
                read_secret(&mut r, "current password").ok()?;
                let password = read_secret(&mut r, "new password").ok()?;
                Self {
                    user,
                    username: None,
                    password: Some(password),
                }
            }
            code::UPDATE_USER => {
                let user = Identifier::decode(&mut r).ok()?;
                let renamed = read_presence(&mut r, "has username").ok()?;
                let username = if renamed { Some(r.name().ok()?) } else { None };
                Self {
                    user,
                    username,
                    password: None,
                }
            }
            _ => return None,
        };
        (change.username.is_some() || change.password.is_some()).then_some(change)
    }
}

#[cfg(feature = "server")]
whole_body!(ChangePasswordRequest, "change password request", |r| {
    ChangePasswordRequest {
        user: Identifier::decode(&mut r)?,
        current_password: read_secret(&mut r, "current password")?,
        new_password: read_secret(&mut r, "new password")?,
    }
});

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
    fn password_lengths_are_checked_like_the_sdk() {
        assert!(validate_password("ab").is_err());
        assert!(validate_password("abc").is_ok());
        assert!(validate_password(&"p".repeat(100)).is_ok());
        assert_eq!(
            validate_password(&"p".repeat(101)),
            Err(WireError::InvalidLength {
                field: "password",
                len: 101
            })
        );
        assert!(ChangePasswordRequest::new(1.into(), "old", "xy").is_err());
        assert!(ChangePasswordRequest::new(1.into(), "xy", "new").is_err());
        assert!(ChangePasswordRequest::new(1.into(), "old", "new").is_ok());
    }

    #[test]
    fn change_password_round_trips_and_debug_hides_both_secrets() {
        let request = ChangePasswordRequest::new(
            Identifier::try_from("alice").unwrap(),
            "old-secret-1",
            "new-secret-2",
        )
        .unwrap();
        let out = bytes(|o| request.encode(o));
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(ChangePasswordRequest::decode(&out).unwrap(), request);
        for cut in 0..out.len() {
            assert!(ChangePasswordRequest::decode(&out[..cut]).is_err());
        }
        let debug = format!("{request:?}");
        assert!(!debug.contains("old-secret-1") && !debug.contains("new-secret-2"));
    }
    #[test]
    fn secrets_read_any_utf8_of_their_length() {
        let mut r = Reader::new(b"\x00\x02ok\x02\xff\xfe");
        assert_eq!(read_secret(&mut r, "s").unwrap().expose(), "");
        assert_eq!(read_secret(&mut r, "s").unwrap().expose(), "ok");
        assert!(matches!(
            read_secret(&mut r, "s"),
            Err(WireError::InvalidUtf8 { field: "s" })
        ));
        assert!(read_secret(&mut Reader::new(b"\x05ab"), "s").is_err());
    }
}
