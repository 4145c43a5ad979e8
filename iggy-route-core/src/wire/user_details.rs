//! User reply payloads: the `GET_USER` (31) reply, which is also the create-user
//! payload (after the result section), and the `GET_USERS` (32) reply.
//!
//! Shapes follow the crate's `responses/users/`: a user header
//! `[id:u32][created_at:u64][status:u8][username][options_len:u32][options]`, then for
//! the details either `[0,0,0,0]` (no permissions) or `[1][len:u32][permissions]`.
//! Options blocks are written empty and validated and dropped on decode, like the
//! topic header's.

#[cfg(feature = "server")]
use bytes::{BufMut, BytesMut};

use super::topics::{skip_options, whole_body};
use super::{Name, Permissions, Reader, UserStatus, WireError};

/// Smallest encoded user header: 13 fixed bytes, a 1-byte name, an empty options block.
const MIN_USER_INFO_LEN: usize = 13 + 2 + 4;

/// One user as `GET_USERS` lists it (the crate's `UserResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// Numeric user id (the root user is 0 on a 0.11.0 server).
    pub id: u32,
    /// Creation time, µs since the epoch.
    pub created_at: u64,
    /// Whether it may sign in.
    pub status: UserStatus,
    /// Username.
    pub username: Name,
}

impl UserInfo {
    /// Read the wire form (its options block is checked and dropped).
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let value = Self {
            id: r.u32()?,
            created_at: r.u64()?,
            status: UserStatus::read(r)?,
            username: r.name()?,
        };
        skip_options(r)?;
        Ok(value)
    }
}

#[cfg(feature = "server")]
impl UserInfo {
    /// Append the wire form with an empty options block.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u64_le(self.created_at);
        out.put_u8(self.status.as_u8());
        self.username.encode(out);
        out.put_u32_le(0);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        13 + self.username.encoded_len() + 4
    }
}

/// A user with its permissions: the `GET_USER` reply and the create-user payload
/// (the crate's `UserDetailsResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserDetails {
    /// Numeric user id.
    pub id: u32,
    /// Creation time, µs since the epoch.
    pub created_at: u64,
    /// Whether it may sign in.
    pub status: UserStatus,
    /// Username.
    pub username: Name,
    /// Its permissions; `None` grants nothing.
    pub permissions: Option<Permissions>,
}

impl UserDetails {
    /// The user without its permissions.
    pub fn info(&self) -> UserInfo {
        UserInfo {
            id: self.id,
            created_at: self.created_at,
            status: self.status,
            username: self.username.clone(),
        }
    }

    /// Decode a `GET_USER` reply: an empty body means there is no such user, as the
    /// SDK reads it.
    pub fn decode_optional(body: &[u8]) -> Result<Option<Self>, WireError> {
        if body.is_empty() {
            Ok(None)
        } else {
            Self::decode(body).map(Some)
        }
    }
}

#[cfg(feature = "server")]
impl UserDetails {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.info().encode(out);
        match &self.permissions {
            Some(permissions) => {
                out.put_u8(1);
                permissions.encode_prefixed(out);
            }
            // The crate writes "no permissions" as a zero u32, not as a 1-byte flag.
            None => out.put_u32_le(0),
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.info().encoded_len() + self.permissions.as_ref().map_or(4, |p| 5 + p.encoded_len())
    }
}

whole_body!(UserDetails, "user details", |r| {
    let info = UserInfo::read(&mut r)?;
    let permissions = match r.u8()? {
        0 => {
            if r.bytes(3)? != [0, 0, 0] {
                return Err(WireError::NonZeroReserved {
                    field: "no-permissions marker",
                });
            }
            None
        }
        1 => Some(Permissions::read_prefixed(&mut r)?),
        other => {
            return Err(WireError::InvalidValue {
                field: "has permissions",
                value: other.into(),
            });
        }
    };
    UserDetails {
        id: info.id,
        created_at: info.created_at,
        status: info.status,
        username: info.username,
        permissions,
    }
});

/// Decode a `GET_USERS` reply: user headers back to back, in the server's order (an
/// empty body is no users).
pub fn decode_users(body: &[u8]) -> Result<Vec<UserInfo>, WireError> {
    let mut r = Reader::new(body);
    let mut users = Vec::with_capacity(r.remaining() / MIN_USER_INFO_LEN);
    while r.remaining() > 0 {
        users.push(UserInfo::read(&mut r)?);
    }
    Ok(users)
}

/// Append a `GET_USERS` reply.
#[cfg(feature = "server")]
pub fn encode_users(users: &[UserInfo], out: &mut BytesMut) {
    for user in users {
        user.encode(out);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::{GlobalPermissions, StreamPermissions};

    fn details(permissions: Option<Permissions>) -> UserDetails {
        UserDetails {
            id: 4,
            created_at: 1_700_000_000_000_000,
            status: UserStatus::Active,
            username: Name::new("alice").unwrap(),
            permissions,
        }
    }

    fn encode(details: &UserDetails) -> BytesMut {
        let mut out = BytesMut::new();
        details.encode(&mut out);
        out
    }

    #[test]
    fn details_round_trip_with_and_without_permissions() {
        let with = Permissions {
            global: GlobalPermissions {
                read_users: true,
                ..GlobalPermissions::default()
            },
            streams: vec![StreamPermissions {
                stream_id: 3,
                poll_messages: true,
                ..StreamPermissions::default()
            }],
        };
        for permissions in [None, Some(with)] {
            let value = details(permissions);
            let out = encode(&value);
            assert_eq!(out.len(), value.encoded_len());
            assert_eq!(UserDetails::decode(&out).unwrap(), value);
            assert_eq!(UserDetails::decode_optional(&out).unwrap(), Some(value));
            for cut in 1..out.len() {
                assert!(UserDetails::decode(&out[..cut]).is_err());
            }
        }
        assert_eq!(UserDetails::decode_optional(&[]).unwrap(), None);
        let out = encode(&details(None));
        assert_eq!(&out[out.len() - 4..], &[0, 0, 0, 0]);
    }

    #[test]
    fn garbage_details_are_typed_errors() {
        let mut out = encode(&details(None)).to_vec();
        let flag = out.len() - 4;
        out[flag + 2] = 1;
        assert!(matches!(
            UserDetails::decode(&out),
            Err(WireError::NonZeroReserved { .. })
        ));
        out[flag] = 2;
        assert!(matches!(
            UserDetails::decode(&out),
            Err(WireError::InvalidValue { .. })
        ));
        let mut bad_status = encode(&details(None)).to_vec();
        bad_status[12] = 0;
        assert!(UserDetails::decode(&bad_status).is_err());
    }

    #[test]
    fn user_lists_round_trip_and_fail_cleanly() {
        let users = vec![details(None).info(), {
            let mut root = details(None).info();
            root.id = 0;
            root.username = Name::new("iggy").unwrap();
            root
        }];
        let mut out = BytesMut::new();
        encode_users(&users, &mut out);
        assert_eq!(decode_users(&out).unwrap(), users);
        assert_eq!(decode_users(&[]).unwrap(), Vec::new());
        for cut in 1..out.len() {
            if cut != users[0].encoded_len() {
                assert!(decode_users(&out[..cut]).is_err(), "cut at {cut}");
            }
        }
        // An options block whose length runs past the body.
        let mut long = out.to_vec();
        let options_at = users[0].encoded_len() - 4;
        long[options_at..options_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_users(&long).is_err());
    }
}
