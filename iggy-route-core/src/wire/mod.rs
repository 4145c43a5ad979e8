//! The Apache Iggy 0.11.0 binary protocol, as used on TCP.
//!
//! Every message in both directions is a 256-byte consensus header followed by a
//! body of `header.size - 256` bytes. This module encodes and decodes those headers
//! ([`RequestHeader`], [`ReplyHeader`], [`EvictionHeader`]), splits a byte stream into
//! frames ([`FrameDecoder`]), and encodes and decodes the bodies of the commands the
//! router and the test cluster need.
//!
//! The client half (request encoders, reply decoders, the frame decoder) is always
//! built. The server half (request decoders, reply encoders, `ReplyHeader::for_request`,
//! `decode_one`, `Frame::encode`, `encode_request`, `put_result_ok`) is only built with
//! the `server` feature: a client has no use for it, and the loopback test cluster,
//! the crate's own tests and the fuzz targets turn it on.
//!
//! All decoders are total: they return a typed [`WireError`] for any input and never
//! panic, and they never allocate from a count read off the wire beyond what the
//! remaining bytes can hold.

mod cluster;
pub mod codes;
mod consumer_groups;
mod details;
mod error_code;
mod eviction;
mod frame;
mod header;
mod login;
pub mod messages;
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

pub use batch::{BATCH_HEADER_SIZE, BatchHeader, MESSAGE_HEADER_SIZE, encode_batch};
pub use cluster::{
    ClusterMetadata, ClusterNode, ConsumerSession, NodeRole, NodeStatus, PollRouting,
};
pub use codes::{Operation, code};
pub use consumer_groups::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupMember,
    ConsumerGroupRef, CreateConsumerGroupRequest, GetConsumerGroupsRequest,
};
pub use details::{PartitionInfo, StreamDetails, TopicDetails, TopicSummary};
pub use error_code::{ErrorCode, EvictionReason};
pub use eviction::EvictionHeader;
#[cfg(feature = "server")]
pub use frame::decode_one;
pub use frame::{Frame, FrameDecoder};
#[cfg(feature = "server")]
pub use header::encode_request;
pub use header::{
    COMMAND_EVICTION, COMMAND_REPLY, COMMAND_REQUEST, ReplyHeader, RequestHeader, request_checksum,
};
pub use login::{
    LoginRegisterReply, LoginRegisterRequest, LoginRegisterWithPatRequest, PROTOCOL_VERSION,
    Password, SDK_NAME, SDK_VERSION,
};
pub use messages::{Message, SendConfirmation, SendMessagesReply, SendMessagesRequest};
pub use offsets::{
    ConsumerOffsetInfo, ConsumerOffsetKey, DeleteConsumerOffsetRequest, StoreConsumerOffsetRequest,
};
pub use options::{
    CompressionAlgorithm, MAX_OPTIONS, MAX_OPTIONS_BYTES, TopicUpdateOptions, topic_option_key,
};
#[cfg(feature = "server")]
pub use options::{OptionEntry, TopicOptionsError, option_entries};
pub use passwords::{
    ChangePasswordRequest, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, validate_password,
};
pub use permissions::{
    GlobalPermissions, Permissions, StreamPermissions, TopicPermissions, UpdatePermissionsRequest,
};
pub use poll::{PollMessagesReply, PollMessagesRequest, PolledMessage};
pub use primitives::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy};
pub use reader::Reader;
pub use reply::{ReplyError, reply_payload, split_result};
#[cfg(feature = "server")]
pub use reply::{put_result_ok, put_result_rejection};
pub use streams_admin::{
    DeleteStreamRequest, GetTopicsRequest, PurgeStreamRequest, StreamSummary, UpdateStreamRequest,
};
#[cfg(feature = "server")]
pub use system::decode_empty_request;
pub use system::{
    CacheMetric, ClientDetails, ClientInfo, ConsumerGroupMembership, GetClientRequest, ServerStats,
};
#[cfg(feature = "server")]
pub use tokens::encode_personal_access_tokens;
pub use tokens::{
    CreatePersonalAccessTokenRequest, DeletePersonalAccessTokenRequest, PersonalAccessTokenInfo,
    RawPersonalAccessToken, TokenExpiry, decode_personal_access_tokens,
};
pub use topics::{
    CreatePartitionsRequest, CreateStreamRequest, CreateTopicRequest, GetStreamRequest,
    GetTopicRequest,
};
pub use topics_admin::{
    DeletePartitionsRequest, DeleteSegmentsRequest, DeleteTopicRequest, FlushUnsavedBufferRequest,
    PurgeTopicRequest, UpdateTopicRequest, empty_reply,
};
#[cfg(feature = "server")]
pub use user_details::encode_users;
pub use user_details::{UserDetails, UserInfo, decode_users};
pub use user_headers::validate_user_headers;
pub use users::{
    CreateUserRequest, DeleteUserRequest, GetUserRequest, MAX_USERNAME_LENGTH, MIN_USERNAME_LENGTH,
    UpdateUserRequest, UserStatus, validate_username,
};

/// Size of every consensus header on the wire, in bytes.
pub const HEADER_SIZE: usize = 256;

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
