//! One client connection to one node: its session binding, and the dispatch of each decoded
//! request to the handler of its command family.
//!
//! The connection is lockstep (protocol §1.9): every request gets exactly one reply or
//! eviction, except an invalid header, which the real server drops without a reply (§1.3)
//! and which the driver answers by closing the connection.

use bytes::{Bytes, BytesMut};
use iggy_route_core::wire::{
    ErrorCode, EvictionReason, LoginRegisterReply, LoginRegisterRequest,
    LoginRegisterWithPatRequest, Name, Operation, PROTOCOL_VERSION, RequestHeader, SDK_VERSION,
    code,
};

use super::handlers_admin::AdminWrite;
use super::handlers_groups::GroupWrite;
use super::handlers_metadata::MetadataCreate;
use super::handlers_offsets::OffsetWrite;
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId};

/// A command code the model answers with an eviction (`InvalidRequestOperation`), the way
/// the real server answers the legacy login codes: what a retired command looks like.
pub const RETIRED_CODE: u32 = 9_000;

/// The session a connection is signed in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// The client id of the `LOGIN_REGISTER` header.
    pub client_id: u128,
    /// The session epoch the login reply handed out.
    pub session: u64,
    /// The authenticated user.
    pub user_id: u32,
}

/// The parent session a data connection acts for after `ATTACH_CONSUMER_SESSION` (§13.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment {
    /// The parent's client id.
    pub client_id: u128,
    /// The parent's session epoch.
    pub session: u64,
}

/// Per-connection state of the node model.
#[derive(Debug)]
pub struct NodeConnection {
    pub(super) node: NodeId,
    pub(super) binding: Option<Binding>,
    pub(super) attachment: Option<Attachment>,
    /// Highest metadata commit this connection has been told about (§13.1).
    pub(super) watermark: u64,
    /// The server's id for this connection, which replies carry in `client`.
    transport_id: u128,
    closed: bool,
}

impl NodeConnection {
    /// A new connection accepted by `node`; counted in the node's stats.
    pub fn open(state: &mut ClusterState, node: NodeId) -> Self {
        let stats = state.stats_mut(node);
        stats.open_connections += 1;
        stats.connections_total += 1;
        Self {
            node,
            binding: None,
            attachment: None,
            watermark: 0,
            transport_id: state.next_transport_id(),
            closed: false,
        }
    }

    /// The node this connection belongs to.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The session this connection is signed in with.
    pub fn binding(&self) -> Option<Binding> {
        self.binding
    }

    /// The parent session this connection is attached to.
    pub fn attachment(&self) -> Option<Attachment> {
        self.attachment
    }

    /// The connection is gone: release its session (attachments to it die with it) and
    /// count it closed. Calling it twice is harmless.
    pub fn close(&mut self, state: &mut ClusterState) {
        if self.closed {
            return;
        }
        self.closed = true;
        if let Some(binding) = self.binding.take() {
            end_if_owned(state, binding);
        }
        let stats = state.stats_mut(self.node);
        stats.open_connections = stats.open_connections.saturating_sub(1);
    }

    /// Answer one request received by `node` (the node this connection was opened on).
    /// Returns the whole reply or eviction frame, or `None` when the header is invalid and
    /// the real server would drop it without a reply.
    pub fn handle(
        &mut self,
        state: &mut ClusterState,
        node: NodeId,
        header: RequestHeader,
        body: Bytes,
    ) -> Option<Bytes> {
        self.node = node;
        // A purge whose wipe came due, or a revocation the reconciler completed, since the
        // clock last moved lands before the request.
        state.settle();
        let outcome = self.dispatch(state, &header, &body);
        if outcome.is_refusal() {
            state.stats_mut(node).refusals += 1;
        }
        if let Outcome::Evict(_) = outcome {
            state.stats_mut(node).evictions += 1;
        }
        let metadata_plane = header.operation.is_metadata()
            || header.operation == Operation::Register
            || header.operation == Operation::Logout;
        if let Outcome::Reply {
            status: 0, commit, ..
        } = outcome
            && metadata_plane
        {
            self.watermark = self.watermark.max(commit);
        }
        // The real server answers a `CreateTopic` with the operation it turned the request
        // into (`CreateTopicWithAssignments`), not the one it received: seen on the real
        // cluster (tests/real-cluster). The reply's request number is echoed exactly.
        let mut echoed = header;
        if header.operation == Operation::CreateTopic {
            echoed.operation = Operation::CreateTopicWithAssignments;
        }
        // Likewise a `DeleteSegments` is committed, and answered, as the `TruncatePartition`
        // the server resolves it to (`handle_delete_segments_request`, core/server/src/
        // dispatch.rs), whose reply is result-framed.
        if header.operation == Operation::DeleteSegments {
            echoed.operation = Operation::TruncatePartition;
        }
        // Its `client` is the connection's transport id, not the request's client id, and a
        // follower's login reply carries commit 0 (its shard has no metadata plane).
        echoed.client = self.transport_id;
        let outcome = match outcome {
            Outcome::Reply {
                status,
                body,
                op,
                stamp,
                ..
            } if header.operation == Operation::Register && node != state.metadata_leader() => {
                Outcome::Reply {
                    status,
                    body,
                    commit: 0,
                    op,
                    stamp,
                }
            }
            other @ (Outcome::Reply { .. } | Outcome::Evict(_) | Outcome::Drop) => other,
        };
        outcome.into_frame(&echoed)
    }

    fn dispatch(
        &mut self,
        state: &mut ClusterState,
        header: &RequestHeader,
        body: &Bytes,
    ) -> Outcome {
        if !header_is_valid(header) {
            return Outcome::Drop;
        }
        if header.operation == Operation::Register {
            return self.login(state, header, body);
        }
        if header.operation == Operation::NonReplicated {
            state.count_request(self.node, header.code);
            // The legacy login codes are refused with a typed eviction before any session
            // check, signed in or not, as the real server does (it requires the register
            // handshake); the connection stays open.
            if matches!(
                header.code,
                code::LOGIN_USER | code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN
            ) {
                return Outcome::Evict(EvictionReason::MalformedLogin);
            }
            // A command this model's server has retired: refused by ending the session, as
            // the real server refuses the legacy login codes (and as a later server may
            // refuse another old code). Not observed for any other code on the real
            // server, which answers unknown codes with `InvalidCommand`.
            if header.code == RETIRED_CODE {
                return Outcome::Evict(EvictionReason::InvalidRequestOperation);
            }
            return self.dispatch_read(state, header, body);
        }
        state.count_request(self.node, header.operation.code().unwrap_or(0));
        if let Err(eviction) = self.check_session(header) {
            return eviction;
        }
        // The permission check of the acting user, where the server makes it (see `authz`).
        if let Some(binding) = self.binding
            && let Some(denied) =
                super::authz::replicated(state, self.node, binding.user_id, header.operation, body)
        {
            return denied;
        }
        self.dispatch_replicated(state, header, body)
    }

    fn dispatch_read(
        &mut self,
        state: &mut ClusterState,
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        let commit = state.commit();
        let routing = matches!(
            header.code,
            code::ATTACH_CONSUMER_SESSION
                | code::GET_POLL_ROUTING
                | code::POLL_MESSAGES_ON_PRIMARY
                | code::GET_CONSUMER_OFFSET_ROUTING
        );
        if routing && !state.routing_commands() {
            // Servers built before the routing commands treat them as unknown codes.
            return Outcome::status(ErrorCode::InvalidCommand, commit);
        }
        match header.code {
            code::PING => Outcome::empty(commit),
            code::GET_CLUSTER_METADATA
            | code::GET_STREAM
            | code::GET_TOPIC
            | code::POLL_MESSAGES
            | code::GET_CONSUMER_OFFSET
            | code::GET_POLL_ROUTING
            | code::GET_CONSUMER_OFFSET_ROUTING
            | code::ATTACH_CONSUMER_SESSION
            | code::POLL_MESSAGES_ON_PRIMARY
            | code::GET_STATS
            | code::GET_ME
            | code::GET_CLIENT
            | code::GET_CLIENTS
            | code::GET_STREAMS
            | code::GET_TOPICS
            | code::FLUSH_UNSAVED_BUFFER
            | code::GET_USER
            | code::GET_USERS
            | code::GET_PERSONAL_ACCESS_TOKENS
            | code::GET_CONSUMER_GROUP
            | code::GET_CONSUMER_GROUPS
            | code::SYNC_CONSUMER_GROUP => {
                // §13.3: a 104 is authorised by its attachment, not by its own login.
                if self.binding.is_none() && header.code != code::POLL_MESSAGES_ON_PRIMARY {
                    return Outcome::status(ErrorCode::Unauthenticated, commit);
                }
                if let Some(denied) = super::authz::read(self, state, header.code, body) {
                    return denied;
                }
                if matches!(
                    header.code,
                    code::GET_CONSUMER_GROUP
                        | code::GET_CONSUMER_GROUPS
                        | code::SYNC_CONSUMER_GROUP
                ) {
                    // A sync names its member by the client id of its header.
                    return super::handlers_groups::read(
                        self,
                        state,
                        header.code,
                        header.client,
                        body,
                    );
                }
                self.dispatch_authenticated_read(state, header, body)
            }
            _ => Outcome::status(ErrorCode::InvalidCommand, commit),
        }
    }

    fn dispatch_authenticated_read(
        &mut self,
        state: &mut ClusterState,
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        let command = header.code;
        match command {
            code::GET_CLUSTER_METADATA => super::handlers_metadata::cluster_metadata(state),
            code::GET_STREAM => super::handlers_metadata::get_stream(self.node, state, body),
            code::GET_TOPIC => super::handlers_metadata::get_topic(self.node, state, body),
            code::POLL_MESSAGES => {
                super::handlers_messages::poll(self, state, (header.client, body), false)
            }
            code::POLL_MESSAGES_ON_PRIMARY => {
                super::handlers_messages::poll(self, state, (header.client, body), true)
            }
            code::GET_CONSUMER_OFFSET => {
                super::handlers_offsets::get_offset(state, self.node, body)
            }
            code::GET_POLL_ROUTING | code::GET_CONSUMER_OFFSET_ROUTING => {
                super::handlers_routing::routing(self, state, command, body)
            }
            code::ATTACH_CONSUMER_SESSION => super::handlers_routing::attach(self, state, body),
            code::GET_STATS => super::handlers_system::stats(self.node, state),
            code::GET_ME => super::handlers_system::me(self, state),
            code::GET_CLIENT => super::handlers_system::client(self.node, state, body),
            code::GET_CLIENTS => super::handlers_system::clients(self.node, state),
            code::GET_STREAMS => super::handlers_admin::get_streams(self.node, state),
            code::GET_TOPICS => super::handlers_admin::get_topics(self.node, state, body),
            code::FLUSH_UNSAVED_BUFFER => super::handlers_admin::flush(state),
            code::GET_USER | code::GET_USERS | code::GET_PERSONAL_ACCESS_TOKENS => {
                super::handlers_users::read(self, state, command, body)
            }
            _ => Outcome::status(ErrorCode::InvalidCommand, state.commit()),
        }
    }

    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "operations the model does not implement all get InvalidCommand"
    )]
    fn dispatch_replicated(
        &mut self,
        state: &mut ClusterState,
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        match header.operation {
            Operation::Logout => self.logout(state),
            Operation::CreateStream => {
                super::handlers_metadata::write(self.node, state, MetadataCreate::Stream, body)
            }
            Operation::CreateTopic => {
                super::handlers_metadata::write(self.node, state, MetadataCreate::Topic, body)
            }
            Operation::CreatePartitions => {
                super::handlers_metadata::write(self.node, state, MetadataCreate::Partitions, body)
            }
            Operation::UpdateStream => {
                super::handlers_admin::write(self.node, state, AdminWrite::UpdateStream, body)
            }
            Operation::DeleteStream => {
                super::handlers_admin::write(self.node, state, AdminWrite::DeleteStream, body)
            }
            Operation::PurgeStream => {
                super::handlers_admin::write(self.node, state, AdminWrite::PurgeStream, body)
            }
            Operation::UpdateTopic => {
                super::handlers_admin::write(self.node, state, AdminWrite::UpdateTopic, body)
            }
            Operation::DeleteTopic => {
                super::handlers_admin::write(self.node, state, AdminWrite::DeleteTopic, body)
            }
            Operation::PurgeTopic => {
                super::handlers_admin::write(self.node, state, AdminWrite::PurgeTopic, body)
            }
            Operation::DeletePartitions => {
                super::handlers_admin::write(self.node, state, AdminWrite::DeletePartitions, body)
            }
            Operation::DeleteSegments => {
                super::handlers_admin::write(self.node, state, AdminWrite::DeleteSegments, body)
            }
            Operation::CreateUser
            | Operation::UpdateUser
            | Operation::DeleteUser
            | Operation::UpdatePermissions
            | Operation::ChangePassword
            | Operation::CreatePersonalAccessToken
            | Operation::DeletePersonalAccessToken => {
                super::handlers_users::write(self, state, header.operation, body)
            }
            Operation::CreateConsumerGroup => {
                super::handlers_groups::write(self, state, GroupWrite::Create, body)
            }
            Operation::DeleteConsumerGroup => {
                super::handlers_groups::write(self, state, GroupWrite::Delete, body)
            }
            Operation::JoinConsumerGroup => {
                super::handlers_groups::write(self, state, GroupWrite::Join, body)
            }
            Operation::LeaveConsumerGroup => {
                super::handlers_groups::write(self, state, GroupWrite::Leave, body)
            }
            Operation::SendMessages => super::handlers_messages::send(self, state, header, body),
            Operation::StoreConsumerOffset => {
                super::handlers_offsets::write(self, state, OffsetWrite::Store, body)
            }
            Operation::DeleteConsumerOffset => {
                super::handlers_offsets::write(self, state, OffsetWrite::Delete, body)
            }
            // Every other operation, including any added to the codec later, is one the
            // model does not implement: the server's answer to an unknown command.
            _ => Outcome::status(ErrorCode::InvalidCommand, state.commit()),
        }
    }

    /// A replicated op must come from the signed-in client with its current epoch (§3.3).
    fn check_session(&self, header: &RequestHeader) -> Result<(), Outcome> {
        let Some(binding) = self.binding else {
            return Err(Outcome::Evict(EvictionReason::NoSession));
        };
        if header.client != binding.client_id {
            return Err(Outcome::Evict(EvictionReason::NoSession));
        }
        if header.session < binding.session {
            return Err(Outcome::Evict(EvictionReason::SessionTooLow));
        }
        if header.session > binding.session {
            // A future epoch is dropped silently by the client table.
            return Err(Outcome::Drop);
        }
        Ok(())
    }

    fn login(&mut self, state: &mut ClusterState, header: &RequestHeader, body: &[u8]) -> Outcome {
        let request = match LoginRegisterRequest::decode(body) {
            Ok(request) => request,
            Err(_) => {
                // Codes 40 and 45 both arrive as `Register`; only the body tells them apart.
                state.count_request(self.node, code::LOGIN_REGISTER_WITH_PAT);
                let refusal = match LoginRegisterWithPatRequest::decode(body) {
                    Ok(pat) if !version_is_compatible(pat.protocol_version) => {
                        EvictionReason::IncompatibleProtocol
                    }
                    // A token created by `CREATE_PERSONAL_ACCESS_TOKEN`, unexpired, of an
                    // active user signs in as that user; any other is `InvalidToken`
                    // (`UserInactive` for an inactive user).
                    Ok(pat) => match state
                        .users()
                        .authenticate_token(pat.token.expose(), state.now_micros())
                    {
                        Ok(user_id) => return self.bind(state, header, user_id),
                        Err(reason) => reason,
                    },
                    Err(_) => EvictionReason::MalformedLogin,
                };
                state.stats_mut(self.node).login_failures += 1;
                return Outcome::Evict(refusal);
            }
        };
        state.count_request(self.node, code::LOGIN_REGISTER);
        if !version_is_compatible(request.protocol_version) {
            state.stats_mut(self.node).login_failures += 1;
            return Outcome::Evict(EvictionReason::IncompatibleProtocol);
        }
        let Some(user_id) = state.authenticate_on(
            self.node,
            request.username.as_str(),
            request.password.expose(),
        ) else {
            state.stats_mut(self.node).login_failures += 1;
            return Outcome::Evict(EvictionReason::InvalidCredentials);
        };
        self.bind(state, header, user_id)
    }

    /// Sign the connection in as `user_id` and answer the login.
    fn bind(&mut self, state: &mut ClusterState, header: &RequestHeader, user_id: u32) -> Outcome {
        let binding = match self.binding {
            // §3.2: a re-login on a bound connection replays the existing session.
            Some(binding) => binding,
            None => {
                let session = state.register_session(header.client, user_id, self.node);
                let binding = Binding {
                    client_id: header.client,
                    session,
                    user_id,
                };
                self.binding = Some(binding);
                state.stats_mut(self.node).logins += 1;
                binding
            }
        };
        self.watermark = self.watermark.max(binding.session);
        login_reply(binding, state.commit())
    }

    fn logout(&mut self, state: &mut ClusterState) -> Outcome {
        if let Some(binding) = self.binding.take() {
            end_if_owned(state, binding);
        }
        self.attachment = None;
        let commit = state.bump_commit();
        Outcome::empty(commit)
    }
}

/// End the session only if the table still holds this connection's epoch (a newer login
/// with the same client id elsewhere is not ours to end).
fn end_if_owned(state: &mut ClusterState, binding: Binding) {
    if state
        .session(binding.client_id)
        .map(|record| record.session)
        == Some(binding.session)
    {
        state.end_session(binding.client_id);
    }
}

/// §3.2: `client >= MIN && client.major.minor <= server.major.minor`, MIN = server with
/// patch 0.
fn version_is_compatible(client: u32) -> bool {
    let minor_of = |version: u32| version >> 10;
    client >= PROTOCOL_VERSION & !0x3FF && minor_of(client) <= minor_of(PROTOCOL_VERSION)
}

/// §1.3: what the server checks before it looks at a request at all.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "every replicated operation, present or future, needs a session and a request id"
)]
fn header_is_valid(header: &RequestHeader) -> bool {
    if header.client == 0 {
        return false;
    }
    match header.operation {
        Operation::Reserved => false,
        Operation::Register => header.session == 0 && header.request == 0,
        Operation::NonReplicated => true,
        _ => header.session > 0 && header.request > 0,
    }
}

fn login_reply(binding: Binding, commit: u64) -> Outcome {
    let reply = LoginRegisterReply {
        user_id: binding.user_id,
        session: binding.session,
        server_protocol_version: PROTOCOL_VERSION,
        server_version: server_version(),
    };
    let mut payload = BytesMut::with_capacity(reply.encoded_len());
    reply.encode(&mut payload);
    // §3.2: op = session, commit = max(commit_max, session).
    Outcome::result_ok(&payload, commit.max(binding.session)).with_op(binding.session)
}

fn server_version() -> Name {
    Name::new(SDK_VERSION).expect("SDK_VERSION is a valid 6-byte name")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testkit::{Answer, Client, cluster};
    use super::*;

    #[test]
    fn login_binds_a_fresh_session_per_connection_and_moves_the_commit() {
        let mut state = cluster(2);
        let first = Client::signed_in(&mut state, 0, 1);
        let second = Client::signed_in(&mut state, 1, 2);
        assert!(first.session > 0 && second.session > first.session);
        assert_eq!(state.commit(), second.session);
        assert_eq!((state.stats(0).logins, state.stats(1).logins), (1, 1));
        // The root user is user 0, as on the real server.
        assert_eq!(state.session(2).unwrap().user_id, 0);
    }

    #[test]
    fn a_bad_password_is_evicted_with_invalid_credentials() {
        let mut state = cluster(1);
        let mut client = Client::open(&mut state, 0, 1);
        let Answer::Evicted(eviction) = client.login(&mut state, "iggy", "nope") else {
            panic!("expected an eviction");
        };
        assert_eq!(eviction.reason, EvictionReason::InvalidCredentials);
        assert_eq!(state.stats(0).login_failures, 1);
        assert_eq!(state.live_sessions(), 0);
    }

    #[test]
    fn ping_works_before_login_and_other_reads_need_it() {
        let mut state = cluster(1);
        let mut client = Client::open(&mut state, 0, 1);
        assert_eq!(
            client.read(&mut state, code::PING, Bytes::new()).status(),
            0
        );
        let metadata = client.read(&mut state, code::GET_CLUSTER_METADATA, Bytes::new());
        assert_eq!(metadata.status(), ErrorCode::Unauthenticated.as_u32());
        assert_eq!(state.stats(0).requests(code::PING), 1);
    }

    #[test]
    fn unknown_codes_and_disabled_routing_commands_are_invalid_commands() {
        let mut state = cluster(1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        assert_eq!(client.read(&mut state, 9999, Bytes::new()).status(), 3);
        state.set_routing_commands(false);
        for command in [14, 103, 104, 123] {
            assert_eq!(client.read(&mut state, command, Bytes::new()).status(), 3);
        }
    }

    #[test]
    fn legacy_login_codes_and_the_retired_code_end_the_session_whoever_asks() {
        let mut state = cluster(1);
        let mut signed_in = Client::signed_in(&mut state, 0, 1);
        let mut anonymous = Client::open(&mut state, 0, 2);
        for (code, reason) in [
            (code::LOGIN_USER, EvictionReason::MalformedLogin),
            (
                code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
                EvictionReason::MalformedLogin,
            ),
            (RETIRED_CODE, EvictionReason::InvalidRequestOperation),
        ] {
            for client in [&mut signed_in, &mut anonymous] {
                match client.read(&mut state, code, Bytes::new()) {
                    Answer::Evicted(eviction) => assert_eq!(eviction.reason, reason, "{code}"),
                    other @ (Answer::Reply { .. } | Answer::Dropped) => {
                        panic!("code {code}: {other:?}")
                    }
                }
            }
        }
    }

    #[test]
    fn invalid_headers_are_dropped_without_a_reply() {
        let mut state = cluster(1);
        let mut client = Client::open(&mut state, 0, 0);
        assert!(matches!(
            client.read(&mut state, code::PING, Bytes::new()),
            Answer::Dropped
        ));
        let mut client = Client::signed_in(&mut state, 0, 5);
        client.session = 0;
        let answer = client.write(&mut state, Operation::Logout, Bytes::new());
        assert!(matches!(answer, Answer::Dropped));
    }

    #[test]
    fn replicated_ops_without_a_session_are_evicted() {
        let mut state = cluster(1);
        let mut client = Client::open(&mut state, 0, 1);
        client.session = 9;
        let Answer::Evicted(eviction) = client.write(&mut state, Operation::Logout, Bytes::new())
        else {
            panic!("expected an eviction");
        };
        assert_eq!(eviction.reason, EvictionReason::NoSession);
    }

    #[test]
    fn logout_and_close_end_the_session() {
        let mut state = cluster(1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let before = state.commit();
        let answer = client.write(&mut state, Operation::Logout, Bytes::new());
        assert_eq!(answer.header().commit, before + 1);
        assert_eq!(state.session(1), None);
        let mut other = Client::signed_in(&mut state, 0, 2);
        assert_eq!(state.stats(0).open_connections, 2);
        other.connection.close(&mut state);
        other.connection.close(&mut state);
        assert_eq!(state.session(2), None);
        assert_eq!(state.stats(0).open_connections, 1);
    }
}
