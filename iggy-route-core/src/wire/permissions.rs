//! A user's permissions, as `CREATE_USER` (33), `UPDATE_PERMISSIONS` (36) and the
//! `GET_USER` (31) reply carry them, and the `UPDATE_PERMISSIONS` body.
//!
//! The layout is the crate's `WirePermissions`: ten global flags, then a `has_next`
//! chain of streams, each with six flags and its own `has_next` chain of topics:
//!
//! ```text
//! [10 x u8 global][has_streams:u8]
//!   per stream: [stream_id:u32][6 x u8][has_topics:u8]
//!                 per topic: [topic_id:u32][4 x u8][has_next_topic:u8]
//!               [has_next_stream:u8]
//! ```
//!
//! Flags are written 0 or 1 and read as the crate reads them: any nonzero byte is true.
//! Streams and topics keep their wire order (the SDK writes them sorted by id, from its
//! `BTreeMap`s); a repeated id is kept as sent, and the server's own map keeps the last.

use bytes::{BufMut, BytesMut};

#[cfg(feature = "server")]
use super::topics::whole_body;
use super::{Identifier, Reader, WireError};

const GLOBAL_LEN: usize = 10;
const STREAM_FIXED_LEN: usize = 4 + 6 + 1 + 1;
const TOPIC_LEN: usize = 4 + 4 + 1;

/// Server-wide permissions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GlobalPermissions {
    /// Manage the server (and read its state).
    pub manage_servers: bool,
    /// Read server state (stats, clients).
    pub read_servers: bool,
    /// Create, update and delete users, their permissions and passwords.
    pub manage_users: bool,
    /// Read users.
    pub read_users: bool,
    /// Create, update and delete every stream (implies everything below on them).
    pub manage_streams: bool,
    /// Read every stream.
    pub read_streams: bool,
    /// Create, update and delete topics of every stream.
    pub manage_topics: bool,
    /// Read topics of every stream.
    pub read_topics: bool,
    /// Poll messages from every stream.
    pub poll_messages: bool,
    /// Send messages to every stream.
    pub send_messages: bool,
}

impl GlobalPermissions {
    /// Every global permission: what the root user holds.
    pub const ALL: GlobalPermissions = GlobalPermissions {
        manage_servers: true,
        read_servers: true,
        manage_users: true,
        read_users: true,
        manage_streams: true,
        read_streams: true,
        manage_topics: true,
        read_topics: true,
        poll_messages: true,
        send_messages: true,
    };

    fn flags(&self) -> [bool; GLOBAL_LEN] {
        [
            self.manage_servers,
            self.read_servers,
            self.manage_users,
            self.read_users,
            self.manage_streams,
            self.read_streams,
            self.manage_topics,
            self.read_topics,
            self.poll_messages,
            self.send_messages,
        ]
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let [
            manage_servers,
            read_servers,
            manage_users,
            read_users,
            manage_streams,
            read_streams,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
        ] = read_flags::<GLOBAL_LEN>(r)?;
        Ok(Self {
            manage_servers,
            read_servers,
            manage_users,
            read_users,
            manage_streams,
            read_streams,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
        })
    }
}

/// Permissions on one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct StreamPermissions {
    /// The stream's numeric id (permissions name streams by id only).
    pub stream_id: u32,
    /// Update, delete and purge the stream.
    pub manage_stream: bool,
    /// Read the stream.
    pub read_stream: bool,
    /// Create, update and delete its topics.
    pub manage_topics: bool,
    /// Read its topics.
    pub read_topics: bool,
    /// Poll messages from all its topics.
    pub poll_messages: bool,
    /// Send messages to all its topics.
    pub send_messages: bool,
    /// Permissions on single topics of the stream, in wire order.
    pub topics: Vec<TopicPermissions>,
}

impl StreamPermissions {
    fn encoded_len(&self) -> usize {
        STREAM_FIXED_LEN + TOPIC_LEN * self.topics.len()
    }

    fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.stream_id);
        put_flags(
            &[
                self.manage_stream,
                self.read_stream,
                self.manage_topics,
                self.read_topics,
                self.poll_messages,
                self.send_messages,
            ],
            out,
        );
        put_chain(&self.topics, out, TopicPermissions::encode);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let stream_id = r.u32()?;
        let [
            manage_stream,
            read_stream,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
        ] = read_flags::<6>(r)?;
        Ok(Self {
            stream_id,
            manage_stream,
            read_stream,
            manage_topics,
            read_topics,
            poll_messages,
            send_messages,
            topics: read_chain(r, TopicPermissions::read)?,
        })
    }
}

/// Permissions on one topic of a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TopicPermissions {
    /// The topic's numeric id.
    pub topic_id: u32,
    /// Update, delete and purge the topic.
    pub manage_topic: bool,
    /// Read the topic.
    pub read_topic: bool,
    /// Poll messages from it.
    pub poll_messages: bool,
    /// Send messages to it.
    pub send_messages: bool,
}

impl TopicPermissions {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.topic_id);
        put_flags(
            &[
                self.manage_topic,
                self.read_topic,
                self.poll_messages,
                self.send_messages,
            ],
            out,
        );
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let topic_id = r.u32()?;
        let [manage_topic, read_topic, poll_messages, send_messages] = read_flags::<4>(r)?;
        Ok(Self {
            topic_id,
            manage_topic,
            read_topic,
            poll_messages,
            send_messages,
        })
    }
}

/// A user's permissions: global ones, and ones on single streams and their topics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Permissions {
    /// Server-wide permissions.
    pub global: GlobalPermissions,
    /// Per-stream permissions, in wire order.
    pub streams: Vec<StreamPermissions>,
}

impl Permissions {
    /// Every global permission and nothing per stream: the root user's set.
    pub fn all() -> Self {
        Self {
            global: GlobalPermissions::ALL,
            streams: Vec::new(),
        }
    }

    /// Append the wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        put_flags(&self.global.flags(), out);
        put_chain(&self.streams, out, StreamPermissions::encode);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        GLOBAL_LEN
            + 1
            + self
                .streams
                .iter()
                .map(StreamPermissions::encoded_len)
                .sum::<usize>()
    }

    /// Read the wire form from a reader (it carries no length of its own).
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            global: GlobalPermissions::read(r)?,
            streams: read_chain(r, StreamPermissions::read)?,
        })
    }

    /// Append `[len:u32][permissions]`, the form requests and replies embed.
    pub(crate) fn encode_prefixed(&self, out: &mut BytesMut) {
        out.put_u32_le(super::len_u32(self.encoded_len()));
        self.encode(out);
    }

    /// Read `[len:u32][permissions]`: the permissions must fill exactly `len` bytes,
    /// as the crate checks on a request.
    pub(crate) fn read_prefixed(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let len = r.u32()? as usize;
        let mut inner = Reader::new(r.bytes(len)?);
        let value = Self::read(&mut inner)?;
        inner.finish("permissions")?;
        Ok(value)
    }
}

fn put_flags(flags: &[bool], out: &mut BytesMut) {
    for flag in flags {
        out.put_u8(u8::from(*flag));
    }
}

fn read_flags<const N: usize>(r: &mut Reader<'_>) -> Result<[bool; N], WireError> {
    let bytes = r.bytes(N)?;
    let mut flags = [false; N];
    for (flag, byte) in flags.iter_mut().zip(bytes) {
        *flag = *byte != 0;
    }
    Ok(flags)
}

/// `[has_first:u8]` then each item followed by its `[has_next:u8]`.
fn put_chain<T>(items: &[T], out: &mut BytesMut, encode: fn(&T, &mut BytesMut)) {
    out.put_u8(u8::from(!items.is_empty()));
    for (index, item) in items.iter().enumerate() {
        encode(item, out);
        out.put_u8(u8::from(index + 1 < items.len()));
    }
}

/// The reverse of [`put_chain`]. Every item consumes input, so the vector never
/// outgrows what the bytes hold.
fn read_chain<T>(
    r: &mut Reader<'_>,
    read: fn(&mut Reader<'_>) -> Result<T, WireError>,
) -> Result<Vec<T>, WireError> {
    let mut items = Vec::new();
    let mut more = r.u8()? != 0;
    while more {
        items.push(read(r)?);
        more = r.u8()? != 0;
    }
    Ok(items)
}

pub(crate) fn read_presence(r: &mut Reader<'_>, field: &'static str) -> Result<bool, WireError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(WireError::InvalidValue {
            field,
            value: other.into(),
        }),
    }
}

/// `[has:u8]` then, when present, `[len:u32][permissions]`.
pub(crate) fn put_optional_permissions(permissions: Option<&Permissions>, out: &mut BytesMut) {
    match permissions {
        Some(permissions) => {
            out.put_u8(1);
            permissions.encode_prefixed(out);
        }
        None => out.put_u8(0),
    }
}

pub(crate) fn optional_permissions_len(permissions: Option<&Permissions>) -> usize {
    1 + permissions.map_or(0, |p| 4 + p.encoded_len())
}

#[cfg(feature = "server")]
pub(crate) fn read_optional_permissions(
    r: &mut Reader<'_>,
) -> Result<Option<Permissions>, WireError> {
    if read_presence(r, "has permissions")? {
        Permissions::read_prefixed(r).map(Some)
    } else {
        Ok(None)
    }
}

/// The `UPDATE_PERMISSIONS` body: the new permissions replace the old ones whole.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpdatePermissionsRequest {
    /// The user.
    pub user: Identifier,
    /// The new permissions; `None` removes them all.
    pub permissions: Option<Permissions>,
}

impl UpdatePermissionsRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.user.encode(out);
        put_optional_permissions(self.permissions.as_ref(), out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.user.encoded_len() + optional_permissions_len(self.permissions.as_ref())
    }
}
#[cfg(feature = "server")]
whole_body!(
    UpdatePermissionsRequest,
    "update permissions request",
    |r| {
        UpdatePermissionsRequest {
            user: Identifier::decode(&mut r)?,
            permissions: read_optional_permissions(&mut r)?,
        }
    }
);

#[cfg(test)]
#[path = "permissions_tests.rs"]
mod tests;
