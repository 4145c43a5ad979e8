//! `LOGIN_REGISTER` (40) and `LOGIN_REGISTER_WITH_PAT` (45) bodies (§3.2).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::{Name, Reader, WireError, len_u32};

/// Packed protocol version 0.11.0: `major << 20 | minor << 10 | patch`.
pub const PROTOCOL_VERSION: u32 = 0x2C00;
/// The SDK name the 0.11.0 Rust SDK sends; servers may key behaviour on it.
pub const SDK_NAME: &str = "rust-sdk";
/// The SDK version string the 0.11.0 Rust SDK sends.
pub const SDK_VERSION: &str = "0.11.0";

/// A secret (password or token) whose `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wrap a secret; it must fit the u8 length prefix (at most 255 bytes).
    pub fn new(secret: impl Into<String>) -> Result<Password, WireError> {
        let secret = secret.into();
        if secret.len() > 255 {
            return Err(WireError::InvalidLength {
                field: "password",
                len: secret.len(),
            });
        }
        Ok(Password(secret))
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn encode(&self, out: &mut BytesMut) {
        // Invariant: at most 255 bytes, checked by `new` and `decode`.
        out.put_u8(self.0.len() as u8);
        out.put_slice(self.0.as_bytes());
    }
}

#[cfg(feature = "server")]
impl Password {
    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let len = r.u8()? as usize;
        let bytes = r.bytes(len)?;
        let text =
            std::str::from_utf8(bytes).map_err(|_| WireError::InvalidUtf8 { field: "password" })?;
        Ok(Password(text.to_owned()))
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

fn put_prefix(protocol_version: u32, sdk_name: &Name, sdk_version: &Name, out: &mut BytesMut) {
    out.put_u32_le(protocol_version);
    sdk_name.encode(out);
    sdk_version.encode(out);
}

fn put_context(context: &Bytes, out: &mut BytesMut) {
    out.put_u32_le(len_u32(context.len()));
    out.put_slice(context);
}

#[cfg(feature = "server")]
fn read_context(r: &mut Reader<'_>) -> Result<Bytes, WireError> {
    let len = r.u32()? as usize;
    Ok(Bytes::copy_from_slice(r.bytes(len)?))
}

/// The `LOGIN_REGISTER` body: version prefix, username, password, context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRegisterRequest {
    /// Packed client protocol version.
    pub protocol_version: u32,
    /// SDK name (the 0.11.0 SDK sends `rust-sdk`).
    pub sdk_name: Name,
    /// SDK version (the 0.11.0 SDK sends `0.11.0`).
    pub sdk_version: Name,
    /// Username.
    pub username: Name,
    /// Password.
    pub password: Password,
    /// Client context (the SDK sends none).
    pub context: Bytes,
}

impl LoginRegisterRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        put_prefix(
            self.protocol_version,
            &self.sdk_name,
            &self.sdk_version,
            out,
        );
        self.username.encode(out);
        self.password.encode(out);
        put_context(&self.context, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        4 + self.sdk_name.encoded_len()
            + self.sdk_version.encoded_len()
            + self.username.encoded_len()
            + 1
            + self.password.0.len()
            + 4
            + self.context.len()
    }
}

#[cfg(feature = "server")]
impl LoginRegisterRequest {
    /// Decode a whole body (trailing bytes are an error, which also tells this
    /// shape apart from the PAT variant).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self {
            protocol_version: r.u32()?,
            sdk_name: r.name()?,
            sdk_version: r.name()?,
            username: r.name()?,
            password: Password::decode(&mut r)?,
            context: read_context(&mut r)?,
        };
        r.finish("login register request")?;
        Ok(value)
    }
}

/// The `LOGIN_REGISTER_WITH_PAT` body: version prefix, token, context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRegisterWithPatRequest {
    /// Packed client protocol version.
    pub protocol_version: u32,
    /// SDK name.
    pub sdk_name: Name,
    /// SDK version.
    pub sdk_version: Name,
    /// Personal access token.
    pub token: Password,
    /// Client context.
    pub context: Bytes,
}

impl LoginRegisterWithPatRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        put_prefix(
            self.protocol_version,
            &self.sdk_name,
            &self.sdk_version,
            out,
        );
        self.token.encode(out);
        put_context(&self.context, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        4 + self.sdk_name.encoded_len()
            + self.sdk_version.encoded_len()
            + 1
            + self.token.0.len()
            + 4
            + self.context.len()
    }
}

#[cfg(feature = "server")]
impl LoginRegisterWithPatRequest {
    /// Decode a whole body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self {
            protocol_version: r.u32()?,
            sdk_name: r.name()?,
            sdk_version: r.name()?,
            token: Password::decode(&mut r)?,
            context: read_context(&mut r)?,
        };
        r.finish("login register with pat request")?;
        Ok(value)
    }
}

/// The login reply payload (after the `[count = 0]` result section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRegisterReply {
    /// The signed-in user.
    pub user_id: u32,
    /// Session epoch, must be nonzero.
    pub session: u64,
    /// The server's packed protocol version.
    pub server_protocol_version: u32,
    /// The server's version string.
    pub server_version: Name,
}

impl LoginRegisterReply {
    /// Decode the payload (without the result section).
    pub fn decode(payload: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(payload);
        let value = Self {
            user_id: r.u32()?,
            session: r.u64()?,
            server_protocol_version: r.u32()?,
            server_version: r.name()?,
        };
        r.finish("login register reply")?;
        Ok(value)
    }
}

#[cfg(feature = "server")]
impl LoginRegisterReply {
    /// Append the payload (without the result section).
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.user_id);
        out.put_u64_le(self.session);
        out.put_u32_le(self.server_protocol_version);
        self.server_version.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        16 + self.server_version.encoded_len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::request_checksum;

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn login_body_matches_the_section_10_vector() {
        let request = LoginRegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            sdk_name: name(SDK_NAME),
            sdk_version: name(SDK_VERSION),
            username: name("iggy"),
            password: Password::new("iggy").unwrap(),
            context: Bytes::new(),
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        let expected = [
            0x00, 0x2c, 0x00, 0x00, 0x08, 0x72, 0x75, 0x73, 0x74, 0x2d, 0x73, 0x64, 0x6b, 0x06,
            0x30, 0x2e, 0x31, 0x31, 0x2e, 0x30, 0x04, 0x69, 0x67, 0x67, 0x79, 0x04, 0x69, 0x67,
            0x67, 0x79, 0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(&out[..], &expected);
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(request_checksum(&out), 0x8fde_203c_2a3f_8095);
        assert_eq!(LoginRegisterRequest::decode(&out).unwrap(), request);
        assert!(LoginRegisterWithPatRequest::decode(&out).is_err());
    }

    #[test]
    fn login_reply_matches_the_section_10_vector() {
        let reply = LoginRegisterReply {
            user_id: 1,
            session: 100,
            server_protocol_version: PROTOCOL_VERSION,
            server_version: name("0.11.0"),
        };
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        let expected = [
            0x01, 0, 0, 0, 0x64, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x2c, 0, 0, 0x06, 0x30, 0x2e, 0x31,
            0x31, 0x2e, 0x30,
        ];
        assert_eq!(&out[..], &expected);
        assert_eq!(LoginRegisterReply::decode(&out).unwrap(), reply);
    }

    #[test]
    fn password_debug_and_display_hide_the_secret() {
        let password = Password::new("hunter2").unwrap();
        assert_eq!(format!("{password:?}"), "***");
        assert_eq!(password.to_string(), "***");
        let request = LoginRegisterWithPatRequest {
            protocol_version: PROTOCOL_VERSION,
            sdk_name: name(SDK_NAME),
            sdk_version: name(SDK_VERSION),
            token: password,
            context: Bytes::from_static(b"ctx"),
        };
        assert!(!format!("{request:?}").contains("hunter2"));
        let mut out = BytesMut::new();
        request.encode(&mut out);
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(LoginRegisterWithPatRequest::decode(&out).unwrap(), request);
    }
}
