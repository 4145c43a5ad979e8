//! The Apache Iggy 0.11.0 binary protocol, as used on TCP.
//!
//! Every message in both directions is a 256-byte consensus header followed by a
//! body of `header.size - 256` bytes. This module encodes and decodes those headers
//! (`RequestHeader`, `ReplyHeader`, `EvictionHeader`), splits a byte stream into
//! frames (`FrameDecoder`), and encodes and decodes the bodies of the commands the
//! router and the test cluster need.
//!
//! A user sees only the protocol's data types here: what a request names (`Identifier`,
//! `Consumer`, `PollingStrategy`, `Message` and its typed `UserHeaders`), what a reply
//! carries (`PolledMessage`, `TopicDetails`, `ServerStats`, ...) and the server's
//! `ErrorCode`. The codec itself (headers, frames, request bodies, reply splitting) is the
//! crate's own; it is public only with the `server` feature, which also builds its server
//! half (request decoders, reply encoders, `ReplyHeader::for_request`, `decode_one`,
//! `Frame::encode`, `encode_request`, `put_result_ok`): a client has no use for either, and
//! the loopback test cluster, the crate's own tests and the fuzz targets turn it on.
//!
//! All decoders are total: they return a typed [`WireError`] for any input and never
//! panic, and they never allocate from a count read off the wire beyond what the
//! remaining bytes can hold.

// Without `server` the codec is this crate's own: its items stay `pub` for the server
// build, where they are the test cluster's and the fuzz targets' API, and may go unused by
// a client (a reply decoder's length helper, the server half's constants).
#![cfg_attr(not(feature = "server"), allow(unreachable_pub, dead_code))]

mod cluster;
mod codes;
mod consumer_groups;
mod details;
mod error_code;
mod eviction;
mod frame;
mod header;
mod headers;
mod login;
mod messages;
mod offsets;
mod options;
mod passwords;
mod permissions;
mod poll;
mod primitives;
mod reader;
mod reply;
mod reply_header;
mod streams_admin;
mod system;
mod tokens;
mod topics;
mod topics_admin;
mod user_details;
mod user_headers;
mod users;

mod batch;

/// Re-exports an item of the codec itself (headers, frames, request bodies, reply
/// splitting): public with the `server` feature, which the loopback test cluster, the
/// workspace's tests and the fuzz targets turn on to build and read frames; visible to
/// this crate only otherwise, since a client never touches the codec. Not every item is
/// used by a client build, hence the allowance.
macro_rules! codec_use {
    ($($path:tt)*) => {
        #[cfg(feature = "server")]
        pub use $($path)*;
        #[cfg(not(feature = "server"))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

// What a user sends, receives and names: the protocol's data types.
pub use cluster::{
    ClusterMetadata, ClusterNode, ConsumerSession, NodeRole, NodeStatus, PollRouting,
};
pub use consumer_groups::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupMember,
    ConsumerGroupRef,
};
pub use details::{PartitionInfo, StreamDetails, TopicDetails, TopicSummary};
pub use error_code::{ErrorCode, EvictionReason};
pub use headers::{HeaderError, HeaderKey, HeaderKind, HeaderValue};
pub use login::Password;
pub use messages::Message;
pub use offsets::ConsumerOffsetInfo;
pub use options::{CompressionAlgorithm, TopicUpdateOptions};
pub use passwords::{MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, validate_password};
pub use permissions::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions};
pub use poll::{PollMessagesReply, PolledMessage};
pub use primitives::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy};
pub use streams_admin::StreamSummary;
pub use system::{CacheMetric, ClientDetails, ClientInfo, ConsumerGroupMembership, ServerStats};
pub use tokens::{PersonalAccessTokenInfo, RawPersonalAccessToken, TokenExpiry};
pub use user_details::{UserDetails, UserInfo};
pub use user_headers::{UserHeaders, validate_user_headers};
pub use users::{MAX_USERNAME_LENGTH, MIN_USERNAME_LENGTH, UserStatus, validate_username};

// The codec.
codec_use!(batch::{BATCH_HEADER_SIZE, BatchHeader, MESSAGE_HEADER_SIZE, encode_batch});
codec_use!(codes::{Operation, code});
codec_use!(consumer_groups::{CreateConsumerGroupRequest, GetConsumerGroupsRequest});
codec_use!(eviction::EvictionHeader);
codec_use!(frame::{Frame, FrameDecoder});
codec_use!(header::{
    COMMAND_EVICTION, COMMAND_REPLY, COMMAND_REQUEST, ReplyHeader, RequestHeader, request_checksum,
});
codec_use!(login::{
    LoginRegisterReply, LoginRegisterRequest, LoginRegisterWithPatRequest, PROTOCOL_VERSION,
    SDK_NAME, SDK_VERSION,
});
codec_use!(messages::{SendConfirmation, SendMessagesReply, SendMessagesRequest});
codec_use!(offsets::{
    ConsumerOffsetKey, DeleteConsumerOffsetRequest, StoreConsumerOffsetRequest,
});
codec_use!(options::{MAX_OPTIONS, MAX_OPTIONS_BYTES, topic_option_key});
codec_use!(passwords::ChangePasswordRequest);
pub(crate) use passwords::AccountChange;
codec_use!(permissions::UpdatePermissionsRequest);
codec_use!(poll::PollMessagesRequest);
codec_use!(reader::Reader);
codec_use!(reply::{ReplyError, reply_payload, split_result});
codec_use!(streams_admin::{
    DeleteStreamRequest, GetTopicsRequest, PurgeStreamRequest, UpdateStreamRequest,
});
codec_use!(system::GetClientRequest);
codec_use!(tokens::{
    CreatePersonalAccessTokenRequest, DeletePersonalAccessTokenRequest,
    decode_personal_access_tokens,
});
codec_use!(topics::{
    CreatePartitionsRequest, CreateStreamRequest, CreateTopicRequest, GetStreamRequest,
    GetTopicRequest,
});
codec_use!(topics_admin::{
    DeletePartitionsRequest, DeleteSegmentsRequest, DeleteTopicRequest, FlushUnsavedBufferRequest,
    PurgeTopicRequest, UpdateTopicRequest, empty_reply,
});
codec_use!(user_details::decode_users);
codec_use!(users::{
    CreateUserRequest, DeleteUserRequest, GetUserRequest, UpdateUserRequest,
});
#[cfg(feature = "server")]
pub use frame::decode_one;
#[cfg(feature = "server")]
pub use header::encode_request;
#[cfg(feature = "server")]
pub use options::{OptionEntry, TopicOptionsError, option_entries};
#[cfg(feature = "server")]
pub use reply::{put_result_ok, put_result_rejection};
#[cfg(feature = "server")]
pub use system::decode_empty_request;
#[cfg(feature = "server")]
pub use tokens::encode_personal_access_tokens;
#[cfg(feature = "server")]
pub use user_details::encode_users;

/// Size of every consensus header on the wire, in bytes.
#[cfg(feature = "server")]
pub const HEADER_SIZE: usize = 256;
/// Size of every consensus header on the wire, in bytes.
#[cfg(not(feature = "server"))]
pub(crate) const HEADER_SIZE: usize = 256;

/// Default cap on a whole frame (header and body), matching the server's 64 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 64 * 1024 * 1024;

/// Why some bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The input ended before a field was complete.
    #[error("truncated at offset {offset}: need {need} bytes, have {have}")]
    Truncated {
        /// Offset of the field within the decoded buffer.
        offset: usize,
        /// Bytes the field needs.
        need: usize,
        /// Bytes that were left.
        have: usize,
    },
    /// A frame header announced a size below the 256-byte header.
    #[error("frame size {size} is smaller than the header")]
    FrameTooSmall {
        /// The announced size.
        size: u32,
    },
    /// A frame header announced a size above the configured cap.
    #[error("frame size {size} exceeds the maximum {max}")]
    FrameTooLarge {
        /// The announced size.
        size: u32,
        /// The configured cap.
        max: u32,
    },
    /// The header's command byte is not Request, Reply or Eviction.
    #[error("unknown command byte {byte}")]
    UnknownCommand {
        /// The command byte.
        byte: u8,
    },
    /// The header's operation byte is not a known `Operation`.
    #[error("unknown operation byte {byte}")]
    UnknownOperation {
        /// The operation byte.
        byte: u8,
    },
    /// A field holds a value outside its domain.
    #[error("invalid value {value} for {field}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// The value read.
        value: u64,
    },
    /// A length field is outside its allowed range or inconsistent.
    #[error("invalid length {len} for {field}")]
    InvalidLength {
        /// The field.
        field: &'static str,
        /// The length read.
        len: usize,
    },
    /// A text field is not valid UTF-8.
    #[error("{field} is not valid utf-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// Bytes were left over after a complete value.
    #[error("{count} trailing bytes after {field}")]
    TrailingBytes {
        /// The value that was complete.
        field: &'static str,
        /// How many bytes were left.
        count: usize,
    },
    /// A checksum does not match the bytes it covers.
    #[error("checksum mismatch in {field}")]
    ChecksumMismatch {
        /// The checksummed field.
        field: &'static str,
    },
    /// A reserved region holds nonzero bytes.
    #[error("nonzero reserved bytes in {field}")]
    NonZeroReserved {
        /// The reserved region.
        field: &'static str,
    },
}

/// Convert a length to a u32 wire field, saturating (callers bound lengths first).
pub(crate) fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
