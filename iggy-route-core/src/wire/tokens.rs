//! Personal access tokens: `GET_PERSONAL_ACCESS_TOKENS` (41, empty body),
//! `CREATE_PERSONAL_ACCESS_TOKEN` (42) and `DELETE_PERSONAL_ACCESS_TOKEN` (43), and
//! their reply payloads (crate `requests/personal_access_tokens/`,
//! `responses/personal_access_tokens/`).
//!
//! A token acts for the user that created it, who is the session's user: no body
//! names a user. The raw token exists only in the create reply, so it is read
//! straight into a [`Password`] and never printed.

use std::time::Duration;

use bytes::{BufMut, BytesMut};

#[cfg(feature = "server")]
use super::passwords::put_secret;
use super::passwords::read_secret;
#[cfg(feature = "server")]
use super::topics::whole_body;
use super::{Name, Password, Reader, WireError};

/// How long a new token lives: the SDK's `PersonalAccessTokenExpiry` (`IggyExpiry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenExpiry {
    /// Wire 0: the server's default, which a 0.11.0 server treats as never.
    ServerDefault,
    /// Wire `u64::MAX`: never.
    Never,
    /// This long after creation (µs on the wire; a zero duration is sent as 0 and so
    /// means the server default, as in the SDK).
    After(Duration),
}

impl TokenExpiry {
    /// The wire value, µs.
    pub fn as_micros(self) -> u64 {
        match self {
            Self::ServerDefault => 0,
            Self::Never => u64::MAX,
            // Saturating: a duration beyond u64 µs (584,000 years) is as good as never.
            Self::After(after) => u64::try_from(after.as_micros()).unwrap_or(u64::MAX),
        }
    }

    /// The expiry a wire value stands for.
    pub fn from_micros(micros: u64) -> Self {
        match micros {
            0 => Self::ServerDefault,
            u64::MAX => Self::Never,
            micros => Self::After(Duration::from_micros(micros)),
        }
    }
}

/// The `CREATE_PERSONAL_ACCESS_TOKEN` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreatePersonalAccessTokenRequest {
    /// The token's name, unique per user.
    pub name: Name,
    /// Expiry, µs after creation ([`TokenExpiry::as_micros`]).
    pub expiry: u64,
}

impl CreatePersonalAccessTokenRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.name.encode(out);
        out.put_u64_le(self.expiry);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.name.encoded_len() + 8
    }
}
#[cfg(feature = "server")]
whole_body!(
    CreatePersonalAccessTokenRequest,
    "create personal access token request",
    |r| CreatePersonalAccessTokenRequest {
        name: r.name()?,
        expiry: r.u64()?,
    }
);

/// The `DELETE_PERSONAL_ACCESS_TOKEN` body: the session user's token, by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeletePersonalAccessTokenRequest {
    /// The token's name.
    pub name: Name,
}

impl DeletePersonalAccessTokenRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.name.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.name.encoded_len()
    }
}
#[cfg(feature = "server")]
whole_body!(
    DeletePersonalAccessTokenRequest,
    "delete personal access token request",
    |r| DeletePersonalAccessTokenRequest { name: r.name()? }
);

/// One token as `GET_PERSONAL_ACCESS_TOKENS` lists it: its name and expiry, never
/// the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PersonalAccessTokenInfo {
    /// The token's name.
    pub name: Name,
    /// When it expires, µs since the epoch; 0 when it never does.
    pub expiry_at: u64,
}

impl PersonalAccessTokenInfo {
    /// When it expires (µs since the epoch), `None` when it never does: how the SDK
    /// reads [`expiry_at`](Self::expiry_at).
    pub fn expires_at(&self) -> Option<u64> {
        (self.expiry_at != 0).then_some(self.expiry_at)
    }

    /// Read the wire form `[name][expiry_at:u64]`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            name: r.name()?,
            expiry_at: r.u64()?,
        })
    }

    /// Append the wire form.
    #[cfg(feature = "server")]
    pub fn encode(&self, out: &mut BytesMut) {
        self.name.encode(out);
        out.put_u64_le(self.expiry_at);
    }
}

/// Decode a `GET_PERSONAL_ACCESS_TOKENS` reply: entries back to back, in the server's
/// order (an empty body is no tokens).
pub fn decode_personal_access_tokens(
    body: &[u8],
) -> Result<Vec<PersonalAccessTokenInfo>, WireError> {
    let mut r = Reader::new(body);
    // Each entry is at least a 2-byte name and an 8-byte expiry.
    let mut tokens = Vec::with_capacity(r.remaining() / 10);
    while r.remaining() > 0 {
        tokens.push(PersonalAccessTokenInfo::read(&mut r)?);
    }
    Ok(tokens)
}

/// Append a `GET_PERSONAL_ACCESS_TOKENS` reply.
#[cfg(feature = "server")]
pub fn encode_personal_access_tokens(tokens: &[PersonalAccessTokenInfo], out: &mut BytesMut) {
    for token in tokens {
        token.encode(out);
    }
}

/// The create-token payload (after the result section): the raw token, shown once.
/// Its `Debug` prints `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPersonalAccessToken {
    /// The token, to sign in with `LOGIN_REGISTER_WITH_PAT`.
    pub token: Password,
}

impl RawPersonalAccessToken {
    /// Decode the whole payload `[len:u8 (1..=255)][utf8]` (a `WireName` in the crate,
    /// so an empty token is refused as it is there).
    pub fn decode(payload: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(payload);
        if r.rest_view().first() == Some(&0) {
            return Err(WireError::InvalidLength {
                field: "personal access token",
                len: 0,
            });
        }
        let token = read_secret(&mut r, "personal access token")?;
        r.finish("personal access token")?;
        Ok(Self { token })
    }
}

#[cfg(feature = "server")]
impl RawPersonalAccessToken {
    /// Append the payload.
    pub fn encode(&self, out: &mut BytesMut) {
        put_secret(&self.token, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        1 + self.token.expose().len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn expiry_maps_like_the_sdk() {
        assert_eq!(TokenExpiry::ServerDefault.as_micros(), 0);
        assert_eq!(TokenExpiry::Never.as_micros(), u64::MAX);
        let hour = TokenExpiry::After(Duration::from_secs(3600));
        assert_eq!(hour.as_micros(), 3_600_000_000);
        for expiry in [TokenExpiry::ServerDefault, TokenExpiry::Never, hour] {
            assert_eq!(TokenExpiry::from_micros(expiry.as_micros()), expiry);
        }
        assert_eq!(TokenExpiry::After(Duration::MAX).as_micros(), u64::MAX);
    }

    #[test]
    fn requests_round_trip() {
        let create = CreatePersonalAccessTokenRequest {
            name: name("ci"),
            expiry: 5,
        };
        let mut out = BytesMut::new();
        create.encode(&mut out);
        assert_eq!(&out[..], b"\x02ci\x05\0\0\0\0\0\0\0");
        assert_eq!(out.len(), create.encoded_len());
        assert_eq!(
            CreatePersonalAccessTokenRequest::decode(&out).unwrap(),
            create
        );
        for cut in 0..out.len() {
            assert!(CreatePersonalAccessTokenRequest::decode(&out[..cut]).is_err());
        }
        let delete = DeletePersonalAccessTokenRequest { name: name("ci") };
        let mut out = BytesMut::new();
        delete.encode(&mut out);
        assert_eq!(out.len(), delete.encoded_len());
        assert_eq!(
            DeletePersonalAccessTokenRequest::decode(&out).unwrap(),
            delete
        );
        assert!(DeletePersonalAccessTokenRequest::decode(b"\x02c").is_err());
    }

    #[test]
    fn token_lists_round_trip_and_fail_cleanly() {
        let tokens = vec![
            PersonalAccessTokenInfo {
                name: name("a"),
                expiry_at: 0,
            },
            PersonalAccessTokenInfo {
                name: name("b"),
                expiry_at: 42,
            },
        ];
        assert_eq!(tokens[0].expires_at(), None);
        assert_eq!(tokens[1].expires_at(), Some(42));
        let mut out = BytesMut::new();
        encode_personal_access_tokens(&tokens, &mut out);
        assert_eq!(decode_personal_access_tokens(&out).unwrap(), tokens);
        for cut in 1..out.len() {
            if cut != 10 {
                assert!(decode_personal_access_tokens(&out[..cut]).is_err());
            }
        }
        assert!(decode_personal_access_tokens(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn raw_token_round_trips_and_never_prints() {
        let raw = RawPersonalAccessToken {
            token: Password::new("tok-very-secret").unwrap(),
        };
        let mut out = BytesMut::new();
        raw.encode(&mut out);
        assert_eq!(out.len(), raw.encoded_len());
        assert_eq!(RawPersonalAccessToken::decode(&out).unwrap(), raw);
        assert!(!format!("{raw:?}").contains("very-secret"));
        assert!(RawPersonalAccessToken::decode(&[]).is_err());
        assert!(RawPersonalAccessToken::decode(&[0]).is_err());
        assert!(RawPersonalAccessToken::decode(&[2, b'a']).is_err());
        assert!(RawPersonalAccessToken::decode(&[1, 0xff]).is_err());
        assert!(RawPersonalAccessToken::decode(&[1, b'a', 0]).is_err());
    }
}
