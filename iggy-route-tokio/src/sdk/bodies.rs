//! The requests an SDK trait method sends that no native method sends as such: a create or
//! update carrying the SDK's own options block, and a snapshot. Each is a core
//! [`Call::command`], routed as the native calls of the same command are (creates and
//! updates to the metadata leader, the snapshot to the node holding the session), its
//! body laid out as the SDK 0.11.0 lays it out.
//!
//! The options blocks come from the SDK's own encoders (`TopicCreateOptions::to_wire` and
//! the like), so every option the caller set goes out exactly as the SDK would send it, and
//! the server judges it as it would the SDK's.

use bytes::{BufMut, Bytes, BytesMut};
use iggy_common::IggyError;
use iggy_route_core::Plane;
use iggy_route_core::client::Call;
use iggy_route_core::wire::{Identifier, Name, TopicDetails, UserStatus, WireError};

/// Command codes (protocol §1.7).
mod code {
    pub(super) const GET_SNAPSHOT_FILE: u32 = 11;
    pub(super) const UPDATE_USER: u32 = 35;
    pub(super) const UPDATE_STREAM: u32 = 204;
    pub(super) const CREATE_TOPIC: u32 = 302;
    pub(super) const UPDATE_TOPIC: u32 = 304;
}

/// `CREATE_TOPIC`: `[stream][partitions_count:u32][name][options to the end]`.
pub(super) fn create_topic(
    stream: &Identifier,
    name: &Name,
    partitions_count: u32,
    options: &[u8],
) -> Call<TopicDetails> {
    let mut body =
        BytesMut::with_capacity(stream.encoded_len() + 4 + name.encoded_len() + options.len());
    stream.encode(&mut body);
    body.put_u32_le(partitions_count);
    name.encode(&mut body);
    body.put_slice(options);
    Call::command(
        "create topic",
        code::CREATE_TOPIC,
        body.freeze(),
        Plane::MetadataWrite,
        TopicDetails::decode,
    )
}

/// `UPDATE_TOPIC`: `[stream][topic][name][options to the end]`.
pub(super) fn update_topic(
    stream: &Identifier,
    topic: &Identifier,
    name: &Name,
    options: &[u8],
) -> Call<()> {
    let mut body = BytesMut::with_capacity(
        stream.encoded_len() + topic.encoded_len() + name.encoded_len() + options.len(),
    );
    stream.encode(&mut body);
    topic.encode(&mut body);
    name.encode(&mut body);
    body.put_slice(options);
    metadata_write("update topic", code::UPDATE_TOPIC, body.freeze())
}

/// `UPDATE_STREAM`: `[stream][name][options to the end]`.
pub(super) fn update_stream(stream: &Identifier, name: &Name, options: &[u8]) -> Call<()> {
    let mut body =
        BytesMut::with_capacity(stream.encoded_len() + name.encoded_len() + options.len());
    stream.encode(&mut body);
    name.encode(&mut body);
    body.put_slice(options);
    metadata_write("update stream", code::UPDATE_STREAM, body.freeze())
}

/// `UPDATE_USER`: `[user][has_name:u8][name?][has_status:u8][status?][options to the end]`.
pub(super) fn update_user(
    user: &Identifier,
    username: Option<&Name>,
    status: Option<UserStatus>,
    options: &[u8],
) -> Call<()> {
    let mut body = BytesMut::with_capacity(user.encoded_len() + 2 + 256 + 1 + options.len());
    user.encode(&mut body);
    match username {
        Some(name) => {
            body.put_u8(1);
            name.encode(&mut body);
        }
        None => body.put_u8(0),
    }
    match status {
        Some(status) => {
            body.put_u8(1);
            body.put_u8(status.as_u8());
        }
        None => body.put_u8(0),
    }
    body.put_slice(options);
    metadata_write("update user", code::UPDATE_USER, body.freeze())
}

/// `GET_SNAPSHOT_FILE`: `[compression:u8][count:u8][type:u8 x count]`; the reply is the
/// archive's bytes. More than 255 types cannot be counted in a byte: `InvalidCommand`.
pub(super) fn snapshot(compression: u8, types: &[u8]) -> Result<Call<Vec<u8>>, IggyError> {
    let count = u8::try_from(types.len()).map_err(|_| IggyError::InvalidCommand)?;
    let mut body = BytesMut::with_capacity(2 + types.len());
    body.put_u8(compression);
    body.put_u8(count);
    body.put_slice(types);
    Ok(Call::command(
        "snapshot",
        code::GET_SNAPSHOT_FILE,
        body.freeze(),
        Plane::Session,
        |payload| Ok(payload.to_vec()),
    ))
}

fn metadata_write(operation: &'static str, code: u32, body: Bytes) -> Call<()> {
    Call::command(operation, code, body, Plane::MetadataWrite, no_payload)
}

/// The reply of an update: nothing after its result section.
fn no_payload(payload: &[u8]) -> Result<(), WireError> {
    if payload.is_empty() {
        Ok(())
    } else {
        Err(WireError::TrailingBytes {
            field: "update reply",
            count: payload.len(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use iggy_route_core::{CommandRequest, Request};

    use super::*;

    fn command<T>(call: &Call<T>) -> CommandRequest {
        let Request::Command(command) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        command.clone()
    }

    #[test]
    fn bodies_are_laid_out_as_the_sdk_lays_them_out() {
        let stream = Identifier::Numeric(1);
        let name = Name::new("t").unwrap();
        let create = command(&create_topic(&stream, &name, 3, b"opts"));
        assert_eq!(create.code, 302);
        assert_eq!(create.plane, Plane::MetadataWrite);
        assert_eq!(
            &create.body[..],
            b"\x01\x04\x01\x00\x00\x00\x03\x00\x00\x00\x01topts"
        );
        let user = command(&update_user(
            &stream,
            None,
            Some(UserStatus::Inactive),
            b"o",
        ));
        assert_eq!(&user.body[..], b"\x01\x04\x01\x00\x00\x00\x00\x01\x02o");
        let update = command(&update_stream(&stream, &name, b""));
        assert_eq!(&update.body[..], b"\x01\x04\x01\x00\x00\x00\x01t");
        let snapshot = command(&snapshot(2, &[1, 3]).unwrap());
        assert_eq!((snapshot.code, &snapshot.body[..]), (11, &[2, 2, 1, 3][..]));
        assert!(super::snapshot(1, &[0; 256]).is_err());
        assert!(no_payload(b"x").is_err());
    }

    #[test]
    fn every_create_option_set_goes_out_in_the_sdks_own_block() {
        let options = iggy_common::TopicCreateOptions {
            segment_size: Some(iggy_common::IggyByteSize::from(16 * 1024 * 1024)),
            durability: iggy_common::Durability::Persisted,
            message_expiry: Some(iggy_common::IggyExpiry::NeverExpire),
            ..iggy_common::TopicCreateOptions::default()
        };
        let block = options.to_wire().unwrap().into_bytes();
        let name = Name::new("t").unwrap();
        let create = command(&create_topic(&Identifier::Numeric(0), &name, 1, &block));
        assert!(create.body.ends_with(&block));
        for key in [
            &b"segment_size"[..],
            b"durability",
            b"persisted",
            b"message_expiry",
        ] {
            assert!(
                create.body.windows(key.len()).any(|window| window == key),
                "{} missing",
                String::from_utf8_lossy(key)
            );
        }
    }
}
