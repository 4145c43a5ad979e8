//! Command codes (§1.7) and the consensus `Operation` byte (§1.6).

/// Command codes, as carried in bytes 196..200 of a `NonReplicated` request header.
pub mod code {
    /// PING.
    pub const PING: u32 = 1;
    /// GET_STATS.
    pub const GET_STATS: u32 = 10;
    /// GET_SNAPSHOT_FILE.
    pub const GET_SNAPSHOT_FILE: u32 = 11;
    /// GET_CLUSTER_METADATA.
    pub const GET_CLUSTER_METADATA: u32 = 12;
    /// DESCRIBE_OPTIONS.
    pub const DESCRIBE_OPTIONS: u32 = 13;
    /// ATTACH_CONSUMER_SESSION.
    pub const ATTACH_CONSUMER_SESSION: u32 = 14;
    /// GET_ME.
    pub const GET_ME: u32 = 20;
    /// GET_CLIENT.
    pub const GET_CLIENT: u32 = 21;
    /// GET_CLIENTS.
    pub const GET_CLIENTS: u32 = 22;
    /// GET_USER.
    pub const GET_USER: u32 = 31;
    /// GET_USERS.
    pub const GET_USERS: u32 = 32;
    /// CREATE_USER.
    pub const CREATE_USER: u32 = 33;
    /// DELETE_USER.
    pub const DELETE_USER: u32 = 34;
    /// UPDATE_USER.
    pub const UPDATE_USER: u32 = 35;
    /// UPDATE_PERMISSIONS.
    pub const UPDATE_PERMISSIONS: u32 = 36;
    /// CHANGE_PASSWORD.
    pub const CHANGE_PASSWORD: u32 = 37;
    /// LOGIN_USER (legacy, never sent over TCP by 0.11.0).
    pub const LOGIN_USER: u32 = 38;
    /// LOGOUT_USER.
    pub const LOGOUT_USER: u32 = 39;
    /// LOGIN_REGISTER.
    pub const LOGIN_REGISTER: u32 = 40;
    /// GET_PERSONAL_ACCESS_TOKENS.
    pub const GET_PERSONAL_ACCESS_TOKENS: u32 = 41;
    /// CREATE_PERSONAL_ACCESS_TOKEN.
    pub const CREATE_PERSONAL_ACCESS_TOKEN: u32 = 42;
    /// DELETE_PERSONAL_ACCESS_TOKEN.
    pub const DELETE_PERSONAL_ACCESS_TOKEN: u32 = 43;
    /// LOGIN_WITH_PERSONAL_ACCESS_TOKEN (legacy).
    pub const LOGIN_WITH_PERSONAL_ACCESS_TOKEN: u32 = 44;
    /// LOGIN_REGISTER_WITH_PAT.
    pub const LOGIN_REGISTER_WITH_PAT: u32 = 45;
    /// POLL_MESSAGES.
    pub const POLL_MESSAGES: u32 = 100;
    /// SEND_MESSAGES.
    pub const SEND_MESSAGES: u32 = 101;
    /// FLUSH_UNSAVED_BUFFER.
    pub const FLUSH_UNSAVED_BUFFER: u32 = 102;
    /// GET_POLL_ROUTING.
    pub const GET_POLL_ROUTING: u32 = 103;
    /// POLL_MESSAGES_ON_PRIMARY.
    pub const POLL_MESSAGES_ON_PRIMARY: u32 = 104;
    /// GET_CONSUMER_OFFSET.
    pub const GET_CONSUMER_OFFSET: u32 = 120;
    /// STORE_CONSUMER_OFFSET.
    pub const STORE_CONSUMER_OFFSET: u32 = 121;
    /// DELETE_CONSUMER_OFFSET.
    pub const DELETE_CONSUMER_OFFSET: u32 = 122;
    /// GET_CONSUMER_OFFSET_ROUTING.
    pub const GET_CONSUMER_OFFSET_ROUTING: u32 = 123;
    /// GET_STREAM.
    pub const GET_STREAM: u32 = 200;
    /// GET_STREAMS.
    pub const GET_STREAMS: u32 = 201;
    /// CREATE_STREAM.
    pub const CREATE_STREAM: u32 = 202;
    /// DELETE_STREAM.
    pub const DELETE_STREAM: u32 = 203;
    /// UPDATE_STREAM.
    pub const UPDATE_STREAM: u32 = 204;
    /// PURGE_STREAM.
    pub const PURGE_STREAM: u32 = 205;
    /// GET_TOPIC.
    pub const GET_TOPIC: u32 = 300;
    /// GET_TOPICS.
    pub const GET_TOPICS: u32 = 301;
    /// CREATE_TOPIC.
    pub const CREATE_TOPIC: u32 = 302;
    /// DELETE_TOPIC.
    pub const DELETE_TOPIC: u32 = 303;
    /// UPDATE_TOPIC.
    pub const UPDATE_TOPIC: u32 = 304;
    /// PURGE_TOPIC.
    pub const PURGE_TOPIC: u32 = 305;
    /// CREATE_PARTITIONS.
    pub const CREATE_PARTITIONS: u32 = 402;
    /// DELETE_PARTITIONS.
    pub const DELETE_PARTITIONS: u32 = 403;
    /// DELETE_SEGMENTS.
    pub const DELETE_SEGMENTS: u32 = 503;
    /// GET_CONSUMER_GROUP.
    pub const GET_CONSUMER_GROUP: u32 = 600;
    /// GET_CONSUMER_GROUPS.
    pub const GET_CONSUMER_GROUPS: u32 = 601;
    /// CREATE_CONSUMER_GROUP.
    pub const CREATE_CONSUMER_GROUP: u32 = 602;
    /// DELETE_CONSUMER_GROUP.
    pub const DELETE_CONSUMER_GROUP: u32 = 603;
    /// JOIN_CONSUMER_GROUP.
    pub const JOIN_CONSUMER_GROUP: u32 = 604;
    /// LEAVE_CONSUMER_GROUP.
    pub const LEAVE_CONSUMER_GROUP: u32 = 605;
    /// SYNC_CONSUMER_GROUP.
    pub const SYNC_CONSUMER_GROUP: u32 = 606;
}

macro_rules! operations {
    ($($(#[$doc:meta])* $name:ident = $value:literal => $code:expr,)*) => {
        /// The consensus operation byte of a request or reply header (§1.6).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[repr(u8)]
        pub enum Operation {
            /// Invalid on the wire.
            #[default]
            Reserved = 0,
            $($(#[$doc])* $name = $value,)*
        }

        impl Operation {
            /// Every operation, `Reserved` first.
            pub const ALL: &'static [Operation] = &[Operation::Reserved, $(Operation::$name,)*];

            /// The operation with this discriminant, if any.
            pub fn from_u8(byte: u8) -> Option<Self> {
                match byte {
                    0 => Some(Self::Reserved),
                    $($value => Some(Self::$name),)*
                    _ => None,
                }
            }

            /// The command code a replicated operation stands for (`None` for
            /// `Reserved`, `NonReplicated` and the internal operations 64..=68).
            pub fn code(self) -> Option<u32> {
                match self {
                    Self::Reserved => None,
                    $(Self::$name => $code,)*
                }
            }
        }
    };
}

operations! {
    /// Sign-in (`LOGIN_REGISTER` and `LOGIN_REGISTER_WITH_PAT`).
    Register = 1 => Some(code::LOGIN_REGISTER),
    /// Reads, PING and routing queries; the code travels in bytes 196..200.
    NonReplicated = 2 => None,
    /// `LOGOUT_USER`.
    Logout = 3 => Some(code::LOGOUT_USER),
    /// Internal: create topic with assignments.
    CreateTopicWithAssignments = 64 => None,
    /// Internal: create partitions with assignments.
    CreatePartitionsWithAssignments = 65 => None,
    /// Internal: remove a consumer group member.
    RemoveConsumerGroupMember = 66 => None,
    /// Internal: complete a consumer group revocation.
    CompleteConsumerGroupRevocation = 67 => None,
    /// Internal: truncate a partition.
    TruncatePartition = 68 => None,
    /// `CREATE_STREAM`.
    CreateStream = 128 => Some(code::CREATE_STREAM),
    /// `UPDATE_STREAM`.
    UpdateStream = 129 => Some(code::UPDATE_STREAM),
    /// `DELETE_STREAM`.
    DeleteStream = 130 => Some(code::DELETE_STREAM),
    /// `PURGE_STREAM`.
    PurgeStream = 131 => Some(code::PURGE_STREAM),
    /// `CREATE_TOPIC`.
    CreateTopic = 132 => Some(code::CREATE_TOPIC),
    /// `UPDATE_TOPIC`.
    UpdateTopic = 133 => Some(code::UPDATE_TOPIC),
    /// `DELETE_TOPIC`.
    DeleteTopic = 134 => Some(code::DELETE_TOPIC),
    /// `PURGE_TOPIC`.
    PurgeTopic = 135 => Some(code::PURGE_TOPIC),
    /// `CREATE_PARTITIONS`.
    CreatePartitions = 136 => Some(code::CREATE_PARTITIONS),
    /// `DELETE_PARTITIONS`.
    DeletePartitions = 137 => Some(code::DELETE_PARTITIONS),
    /// `DELETE_SEGMENTS`.
    DeleteSegments = 138 => Some(code::DELETE_SEGMENTS),
    /// `CREATE_CONSUMER_GROUP`.
    CreateConsumerGroup = 139 => Some(code::CREATE_CONSUMER_GROUP),
    /// `DELETE_CONSUMER_GROUP`.
    DeleteConsumerGroup = 140 => Some(code::DELETE_CONSUMER_GROUP),
    /// `CREATE_USER`.
    CreateUser = 141 => Some(code::CREATE_USER),
    /// `UPDATE_USER`.
    UpdateUser = 142 => Some(code::UPDATE_USER),
    /// `DELETE_USER`.
    DeleteUser = 143 => Some(code::DELETE_USER),
    /// `CHANGE_PASSWORD`.
    ChangePassword = 144 => Some(code::CHANGE_PASSWORD),
    /// `UPDATE_PERMISSIONS`.
    UpdatePermissions = 145 => Some(code::UPDATE_PERMISSIONS),
    /// `CREATE_PERSONAL_ACCESS_TOKEN`.
    CreatePersonalAccessToken = 146 => Some(code::CREATE_PERSONAL_ACCESS_TOKEN),
    /// `DELETE_PERSONAL_ACCESS_TOKEN`.
    DeletePersonalAccessToken = 147 => Some(code::DELETE_PERSONAL_ACCESS_TOKEN),
    /// `JOIN_CONSUMER_GROUP`.
    JoinConsumerGroup = 148 => Some(code::JOIN_CONSUMER_GROUP),
    /// `LEAVE_CONSUMER_GROUP`.
    LeaveConsumerGroup = 149 => Some(code::LEAVE_CONSUMER_GROUP),
    /// `SEND_MESSAGES` (partition plane).
    SendMessages = 160 => Some(code::SEND_MESSAGES),
    /// `STORE_CONSUMER_OFFSET` (partition plane).
    StoreConsumerOffset = 161 => Some(code::STORE_CONSUMER_OFFSET),
    /// `DELETE_CONSUMER_OFFSET` (partition plane).
    DeleteConsumerOffset = 162 => Some(code::DELETE_CONSUMER_OFFSET),
}

impl Operation {
    /// The operation the 0.11.0 SDK puts on the wire for a command code: login codes
    /// map to `Register`, `LOGOUT_USER` to `Logout`, replicated commands to their
    /// operation, and everything else (unknown codes included) to `NonReplicated`.
    pub fn for_code(code: u32) -> Operation {
        if code == code::LOGIN_REGISTER_WITH_PAT {
            return Operation::Register;
        }
        Operation::ALL
            .iter()
            .copied()
            .find(|op| op.code() == Some(code))
            .unwrap_or(Operation::NonReplicated)
    }

    /// Internal operations (64..=68), never sent by clients.
    pub fn is_internal(self) -> bool {
        (64..128).contains(&(self as u8))
    }

    /// Metadata-plane operations: the internal ones and 128..=149 except `DeleteSegments`.
    pub fn is_metadata(self) -> bool {
        let byte = self as u8;
        self.is_internal() || ((128..=149).contains(&byte) && self != Operation::DeleteSegments)
    }

    /// Partition-plane operations (160 and up).
    pub fn is_partition(self) -> bool {
        self as u8 >= 160
    }

    /// Whether a status-0 reply body starts with a result section (§1.8). `Register`
    /// is result-framed only when its reply body is non-empty; see
    /// [`reply_payload`](super::reply_payload).
    pub fn is_result_framed(self) -> bool {
        self.is_metadata()
            || matches!(
                self,
                Operation::StoreConsumerOffset | Operation::DeleteConsumerOffset
            )
    }

    /// Whether the request body is stamped with `xxh3_64` in `request_checksum`.
    pub fn is_checksummed(self) -> bool {
        matches!(
            self,
            Operation::Register | Operation::Logout | Operation::DeleteSegments
        ) || self.is_metadata()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_round_trips_through_its_byte() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_u8(*op as u8), Some(*op));
        }
        assert_eq!(Operation::from_u8(4), None);
        assert_eq!(Operation::from_u8(163), None);
    }

    #[test]
    fn codes_map_to_the_sdk_wire_operation() {
        assert_eq!(
            Operation::for_code(code::LOGIN_REGISTER),
            Operation::Register
        );
        assert_eq!(
            Operation::for_code(code::LOGIN_REGISTER_WITH_PAT),
            Operation::Register
        );
        assert_eq!(Operation::for_code(code::LOGOUT_USER), Operation::Logout);
        assert_eq!(
            Operation::for_code(code::SEND_MESSAGES),
            Operation::SendMessages
        );
        assert_eq!(
            Operation::for_code(code::CREATE_USER),
            Operation::CreateUser
        );
        assert_eq!(
            Operation::for_code(code::UPDATE_USER),
            Operation::UpdateUser
        );
        assert_eq!(
            Operation::for_code(code::CREATE_PARTITIONS),
            Operation::CreatePartitions
        );
        assert_eq!(
            Operation::for_code(code::POLL_MESSAGES),
            Operation::NonReplicated
        );
        assert_eq!(
            Operation::for_code(code::GET_POLL_ROUTING),
            Operation::NonReplicated
        );
        assert_eq!(Operation::for_code(99_999), Operation::NonReplicated);
    }

    #[test]
    fn planes_and_result_framing_follow_the_table() {
        assert!(Operation::CreateStream.is_result_framed());
        assert!(Operation::StoreConsumerOffset.is_result_framed());
        assert!(!Operation::SendMessages.is_result_framed());
        assert!(!Operation::DeleteSegments.is_result_framed());
        assert!(!Operation::Register.is_result_framed());
        assert!(Operation::SendMessages.is_partition());
        assert!(!Operation::LeaveConsumerGroup.is_partition());
        assert!(Operation::TruncatePartition.is_metadata());
        assert!(!Operation::NonReplicated.is_checksummed());
        assert!(Operation::Register.is_checksummed());
    }
}
