//! Server error codes (`IggyError` codes of `iggy_common` 0.11.0, §6) and eviction
//! reasons (§1.5).

use std::fmt;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal,)*) => {
        /// An `IggyError` code as carried in a reply `status` or a result-section entry.
        ///
        /// Codes this crate does not name decode as [`ErrorCode::Other`]; every code
        /// round-trips through [`ErrorCode::from_u32`] and [`ErrorCode::as_u32`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)*
            /// A code without a name here.
            Other(u32),
        }

        impl ErrorCode {
            /// Every named code.
            pub const NAMED: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The code for a wire value.
            pub fn from_u32(value: u32) -> Self {
                match value {
                    $($value => Self::$name,)*
                    other => Self::Other(other),
                }
            }

            /// The wire value.
            pub fn as_u32(self) -> u32 {
                match self {
                    $(Self::$name => $value,)*
                    Self::Other(other) => other,
                }
            }

            /// The variant name, or `None` for [`ErrorCode::Other`].
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(Self::$name => Some(stringify!($name)),)*
                    Self::Other(_) => None,
                }
            }
        }
    };
}

error_codes! {
    /// Generic error; also what the SDK maps unknown codes to.
    Error = 1,
    /// Unknown command or malformed reply.
    InvalidCommand = 3,
    /// Malformed body or request-checksum mismatch.
    InvalidFormat = 4,
    /// The feature is not available.
    FeatureUnavailable = 5,
    /// Invalid identifier.
    InvalidIdentifier = 6,
    /// SDK-local: disconnected.
    Disconnected = 8,
    /// SDK-local: cannot establish a connection.
    CannotEstablishConnection = 9,
    /// The namespace of a partition op does not resolve.
    ResourceNotFound = 20,
    /// The session was evicted for missed heartbeats.
    StaleClient = 30,
    /// SDK-local: TCP error.
    TcpError = 31,
    /// Not signed in, or the session is gone.
    Unauthenticated = 40,
    /// Permission denied.
    Unauthorized = 41,
    /// Wrong username or password (also a wrong current password in `CHANGE_PASSWORD`).
    InvalidCredentials = 42,
    /// A username outside 3..=50 bytes.
    InvalidUsername = 43,
    /// A password outside 3..=100 bytes.
    InvalidPassword = 44,
    /// The username is taken (create or rename).
    UserAlreadyExists = 46,
    /// The user is inactive.
    UserInactive = 47,
    /// The root user cannot be deleted.
    CannotDeleteUser = 48,
    /// The root user's permissions cannot be changed.
    CannotChangePermissions = 49,
    /// Invalid personal access token name.
    InvalidPersonalAccessTokenName = 50,
    /// The user already has a token of that name.
    PersonalAccessTokenAlreadyExists = 51,
    /// The user holds the most tokens the server allows.
    PersonalAccessTokensLimitReached = 52,
    /// Wrong personal access token.
    InvalidPersonalAccessToken = 53,
    /// The personal access token has expired.
    PersonalAccessTokenExpired = 54,
    /// A token expiry that ends before it starts.
    InvalidPersonalAccessTokenExpiry = 56,
    /// Outcome unknown: replay only on the same session with the same request id.
    TransientNotCommitted = 57,
    /// Never admitted: safe to re-issue anywhere.
    TransientNotAccepted = 58,
    /// A duplicate whose cached reply aged out.
    RequestAlreadyApplied = 59,
    /// SDK-local: not connected.
    NotConnected = 61,
    /// Invalid number encoding (e.g. an empty poll reply body).
    InvalidNumberEncoding = 82,
    /// SDK-local: empty response.
    EmptyResponse = 304,
    /// Stream id not found.
    StreamIdNotFound = 1009,
    /// Stream name not found.
    StreamNameNotFound = 1010,
    /// Stream name already exists.
    StreamNameAlreadyExists = 1012,
    /// Topic id not found.
    TopicIdNotFound = 2010,
    /// Topic name not found.
    TopicNameNotFound = 2011,
    /// Topic name already exists.
    TopicNameAlreadyExists = 2013,
    /// Partition not found.
    PartitionNotFound = 3007,
    /// Consumer offset not found.
    ConsumerOffsetNotFound = 3021,
    /// A message checksum does not match.
    InvalidMessageChecksum = 4027,
    /// Invalid offset.
    InvalidOffset = 4100,
    /// No consumer group with this id in the topic.
    ConsumerGroupIdNotFound = 5000,
    /// No consumer group with this name in the topic.
    ConsumerGroupNameNotFound = 5003,
    /// A consumer group of this name exists in the topic.
    ConsumerGroupNameAlreadyExists = 5004,
    /// The client is not a member of the group.
    ConsumerGroupMemberNotFound = 5006,
    /// Consumer-group fence: the partition is not owned by this member.
    ConsumerGroupPartitionNotOwned = 5009,
    /// Server-internal shard communication failure (outcome unknown).
    ShardCommunicationError = 11001,
    /// SDK-local: bind called twice.
    AlreadyAuthenticated = 14000,
    /// SDK-local: session 0 in the login reply.
    InvalidSession = 14001,
    /// Client protocol version outside the server's window.
    IncompatibleProtocolVersion = 14003,
}

impl ErrorCode {
    /// Whether the code says the stream, topic or partition does not exist (as the node
    /// that answered knows it: a lagging node may not know it yet).
    pub fn is_not_found(self) -> bool {
        matches!(
            self,
            Self::ResourceNotFound
                | Self::StreamIdNotFound
                | Self::TopicIdNotFound
                | Self::PartitionNotFound
        )
    }

    /// Whether the code leaves the request's outcome open: `RequestAlreadyApplied` (59, a
    /// copy of it was applied before) and `ShardCommunicationError` (11001, the node could
    /// not learn what its shard did).
    pub fn says_outcome_unknown(self) -> bool {
        matches!(
            self,
            Self::RequestAlreadyApplied | Self::ShardCommunicationError
        )
    }

    /// Whether the code says that there is no membership to end: the group (or its stream,
    /// topic or partition) is not there, or the client is not one of its members.
    pub fn names_no_membership(self) -> bool {
        self.is_not_found()
            || matches!(
                self,
                Self::ConsumerGroupIdNotFound
                    | Self::ConsumerGroupNameNotFound
                    | Self::ConsumerGroupMemberNotFound
            )
    }

    /// Whether the code says the frame was not processed under a live session (40 / 30):
    /// the session is gone, or was evicted for missed heartbeats.
    pub fn is_session_lost(self) -> bool {
        matches!(self, Self::Unauthenticated | Self::StaleClient)
    }

    /// Whether the code is one of the replicated plane's transient answers (57 / 58): the
    /// node is reachable, but could not (yet) admit or commit the request.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Self::TransientNotAccepted | Self::TransientNotCommitted
        )
    }

    /// Whether the code is a refusal that admitted nothing (58): the request may be issued
    /// again anywhere, and the reply header may name the replica that would admit it.
    pub fn is_refusal(self) -> bool {
        self == Self::TransientNotAccepted
    }

    /// Whether a sign-in refused with this code can never succeed with the same
    /// credentials and client (wrong password or token, a protocol version outside the
    /// server's window, a login body the server cannot read).
    pub fn is_fatal_to_sign_in(self) -> bool {
        matches!(
            self,
            Self::InvalidCredentials
                | Self::InvalidPersonalAccessToken
                | Self::IncompatibleProtocolVersion
                | Self::InvalidFormat
        )
    }

    /// Whether the code says the node does not serve the command to this client at all
    /// (unknown to it, switched off, or not permitted), rather than not now.
    pub fn is_unsupported(self) -> bool {
        matches!(
            self,
            Self::InvalidCommand | Self::FeatureUnavailable | Self::Unauthorized
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.as_u32()),
            None => write!(f, "error code {}", self.as_u32()),
        }
    }
}

/// Why the server evicted a session (byte 255 of an Eviction header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EvictionReason {
    /// 1: no session for the client id.
    NoSession,
    /// 2: client release below the cluster minimum.
    ClientReleaseTooLow,
    /// 3: client release above the cluster maximum.
    ClientReleaseTooHigh,
    /// 4: invalid operation discriminant.
    InvalidRequestOperation,
    /// 5: body failed validation.
    InvalidRequestBody,
    /// 6: body size mismatch.
    InvalidRequestBodySize,
    /// 7: session epoch below the retained minimum (a zombie).
    SessionTooLow,
    /// 8: session release mismatch.
    SessionReleaseMismatch,
    /// 9: wrong credentials.
    InvalidCredentials,
    /// 10: wrong personal access token.
    InvalidToken,
    /// 11: the user is inactive.
    UserInactive,
    /// 12: session error.
    SessionError,
    /// 13: missed heartbeats.
    StaleClient,
    /// 14: protocol version outside the server's window.
    IncompatibleProtocol,
    /// 15: login body without a decodable version prefix.
    MalformedLogin,
    /// Any other byte (0 included).
    Unknown(u8),
}

impl EvictionReason {
    /// The reason for a wire byte.
    pub fn from_u8(byte: u8) -> Self {
        match byte {
            1 => Self::NoSession,
            2 => Self::ClientReleaseTooLow,
            3 => Self::ClientReleaseTooHigh,
            4 => Self::InvalidRequestOperation,
            5 => Self::InvalidRequestBody,
            6 => Self::InvalidRequestBodySize,
            7 => Self::SessionTooLow,
            8 => Self::SessionReleaseMismatch,
            9 => Self::InvalidCredentials,
            10 => Self::InvalidToken,
            11 => Self::UserInactive,
            12 => Self::SessionError,
            13 => Self::StaleClient,
            14 => Self::IncompatibleProtocol,
            15 => Self::MalformedLogin,
            other => Self::Unknown(other),
        }
    }

    /// The wire byte.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::NoSession => 1,
            Self::ClientReleaseTooLow => 2,
            Self::ClientReleaseTooHigh => 3,
            Self::InvalidRequestOperation => 4,
            Self::InvalidRequestBody => 5,
            Self::InvalidRequestBodySize => 6,
            Self::SessionTooLow => 7,
            Self::SessionReleaseMismatch => 8,
            Self::InvalidCredentials => 9,
            Self::InvalidToken => 10,
            Self::UserInactive => 11,
            Self::SessionError => 12,
            Self::StaleClient => 13,
            Self::IncompatibleProtocol => 14,
            Self::MalformedLogin => 15,
            Self::Unknown(other) => other,
        }
    }

    /// The error the SDK raises for this reason (§1.5). For `IncompatibleProtocol`
    /// this assumes a well-formed window; see `EvictionHeader::error_code`.
    pub fn error_code(self) -> ErrorCode {
        match self {
            Self::InvalidCredentials => ErrorCode::InvalidCredentials,
            Self::InvalidToken => ErrorCode::InvalidPersonalAccessToken,
            Self::StaleClient => ErrorCode::StaleClient,
            Self::IncompatibleProtocol => ErrorCode::IncompatibleProtocolVersion,
            Self::MalformedLogin => ErrorCode::InvalidFormat,
            // Byte 0 is the reserved sentinel, which the SDK decodes and reports as an
            // invalid command; a byte past the known reasons does not decode there at all
            // and is reported as unauthenticated.
            Self::ClientReleaseTooLow
            | Self::ClientReleaseTooHigh
            | Self::InvalidRequestOperation
            | Self::InvalidRequestBody
            | Self::InvalidRequestBodySize
            | Self::Unknown(0) => ErrorCode::InvalidCommand,
            Self::NoSession
            | Self::SessionTooLow
            | Self::SessionReleaseMismatch
            | Self::UserInactive
            | Self::SessionError
            | Self::Unknown(_) => ErrorCode::Unauthenticated,
        }
    }

    /// Whether the request the eviction answers is its cause: the server refused that
    /// request itself (its operation, its body, a login code outside the handshake, a
    /// client release it does not take), so writing it again on a new session would only
    /// end that one too. The other reasons are about the session (gone, stale, rotated,
    /// its user deactivated): the request was not processed under it, and may be written
    /// again once a new one is signed in.
    pub fn blames_request(self) -> bool {
        matches!(
            self,
            Self::ClientReleaseTooLow
                | Self::ClientReleaseTooHigh
                | Self::InvalidRequestOperation
                | Self::InvalidRequestBody
                | Self::InvalidRequestBodySize
                | Self::MalformedLogin
                | Self::Unknown(0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_unknown_codes_stay_other() {
        for code in ErrorCode::NAMED {
            assert_eq!(ErrorCode::from_u32(code.as_u32()), *code);
        }
        assert_eq!(ErrorCode::from_u32(7777), ErrorCode::Other(7777));
        assert_eq!(
            ErrorCode::from_u32(58).to_string(),
            "TransientNotAccepted (58)"
        );
        assert_eq!(ErrorCode::Other(7777).to_string(), "error code 7777");
    }

    #[test]
    fn classes_hold_exactly_their_codes() {
        let holders = |class: fn(ErrorCode) -> bool| -> Vec<u32> {
            let mut codes: Vec<u32> = ErrorCode::NAMED
                .iter()
                .copied()
                .chain([ErrorCode::Other(7777), ErrorCode::Other(0)])
                .filter(|code| class(*code))
                .map(ErrorCode::as_u32)
                .collect();
            codes.sort_unstable();
            codes
        };
        assert_eq!(holders(ErrorCode::is_session_lost), [30, 40]);
        assert_eq!(holders(ErrorCode::is_transient), [57, 58]);
        assert_eq!(holders(ErrorCode::is_refusal), [58]);
        assert_eq!(holders(ErrorCode::is_fatal_to_sign_in), [4, 42, 53, 14003]);
        assert_eq!(holders(ErrorCode::is_unsupported), [3, 5, 41]);
        assert_eq!(holders(ErrorCode::is_not_found), [20, 1009, 2010, 3007]);
        // A code decoded from the wire is classed as its named twin.
        assert!(ErrorCode::from_u32(40).is_session_lost());
        assert!(ErrorCode::from_u32(57).is_transient());
        assert!(!ErrorCode::from_u32(57).is_refusal());
    }

    #[test]
    fn eviction_reasons_round_trip_and_map_like_the_sdk() {
        for byte in 0..=255u8 {
            assert_eq!(EvictionReason::from_u8(byte).as_u8(), byte);
        }
        assert_eq!(
            EvictionReason::from_u8(1).error_code(),
            ErrorCode::Unauthenticated
        );
        assert_eq!(
            EvictionReason::from_u8(9).error_code(),
            ErrorCode::InvalidCredentials
        );
        assert_eq!(
            EvictionReason::from_u8(13).error_code(),
            ErrorCode::StaleClient
        );
        assert_eq!(
            EvictionReason::from_u8(15).error_code(),
            ErrorCode::InvalidFormat
        );
        // The reserved byte decodes in the SDK, as a reason it reports as invalid command.
        assert_eq!(
            EvictionReason::from_u8(0).error_code(),
            ErrorCode::InvalidCommand
        );
        assert_eq!(
            EvictionReason::from_u8(99).error_code(),
            ErrorCode::Unauthenticated
        );
    }
}
