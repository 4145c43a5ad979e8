//! System reads: `GET_STATS` (10), `GET_ME` (20), `GET_CLIENT` (21) and `GET_CLIENTS`
//! (22).
//!
//! On the 0.11.0 server a node knows only the clients connected to it
//! (`list_all_clients` gathers its own shards, `core/server/src/dispatch.rs`): `GET_CLIENTS`
//! lists them, `GET_CLIENT` finds one of them (an empty payload otherwise) and the stats'
//! `clients_count` counts them. The model describes a node's clients from the sessions
//! signed in through it, so:
//! - a connection that has not signed in is not listed (the server lists it with user
//!   `u32::MAX`);
//! - a client's id is the low 32 bits of the client id its login carried (the server uses
//!   its own per-connection number), and its address is empty (the model has no sockets);
//! - nobody is in a consumer group (the model has none).
//!
//! Process and host figures of the stats are fixed stand-ins; the counts come from the
//! catalog as the node's metadata copy holds it.

use bytes::BytesMut;
use iggy_route_core::wire::{
    ClientDetails, ClientInfo, ErrorCode, GetClientRequest, SDK_VERSION, ServerStats,
};

use super::handlers_metadata::known_by;
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId, SessionRecord};

/// The wire transport code of TCP.
const TRANSPORT_TCP: u8 = 1;

/// The server version as a number, `major·10⁶ + minor·10³ + patch` (0.11.0).
const SERVER_SEMVER: u32 = 11_000;

/// A signed-in client as `GET_CLIENTS` lists it.
fn client_info(client_id: u128, record: SessionRecord) -> ClientInfo {
    ClientInfo {
        // The low 32 bits, as the server's wire id is the low 32 bits of its own.
        client_id: client_id as u32,
        user_id: record.user_id,
        transport: TRANSPORT_TCP,
        address: String::new(),
        consumer_groups_count: 0,
    }
}

/// The clients signed in through `node`, by client id.
fn clients_of(state: &ClusterState, node: NodeId) -> Vec<ClientInfo> {
    state
        .sessions()
        .filter(|(_, record)| record.node == node)
        .map(|(client_id, record)| client_info(client_id, record))
        .collect()
}

fn details(client: ClientInfo) -> BytesMut {
    let details = ClientDetails {
        client,
        consumer_groups: Vec::new(),
    };
    let mut out = BytesMut::with_capacity(details.encoded_len());
    details.encode(&mut out);
    out
}

/// `GET_ME`: the asking connection's own session.
pub(super) fn me(connection: &NodeConnection, state: &ClusterState) -> Outcome {
    let commit = state.commit();
    // The dispatcher lets only signed-in connections through; a connection without a
    // binding is answered as the unbound read it is.
    let Some(binding) = connection.binding() else {
        return Outcome::status(ErrorCode::Unauthenticated, commit);
    };
    let record = SessionRecord {
        session: binding.session,
        user_id: binding.user_id,
        node: connection.node(),
    };
    Outcome::ok(
        details(client_info(binding.client_id, record)).freeze(),
        commit,
    )
}

/// `GET_CLIENT` on `node`: one of its clients, or an empty payload (also for a body that
/// does not decode, as the server treats it: no such client).
pub(super) fn client(node: NodeId, state: &ClusterState, body: &[u8]) -> Outcome {
    let commit = state.commit();
    let found = GetClientRequest::decode(body).ok().and_then(|request| {
        clients_of(state, node)
            .into_iter()
            .find(|client| client.client_id == request.client_id)
    });
    match found {
        Some(client) => Outcome::ok(details(client).freeze(), commit),
        None => Outcome::empty(commit),
    }
}

/// `GET_CLIENTS` on `node`: its clients, back to back.
pub(super) fn clients(node: NodeId, state: &ClusterState) -> Outcome {
    let mut out = BytesMut::new();
    ClientInfo::encode_list(&clients_of(state, node), &mut out);
    Outcome::ok(out.freeze(), state.commit())
}

/// `GET_STATS` on `node`.
pub(super) fn stats(node: NodeId, state: &ClusterState) -> Outcome {
    let horizon = state.metadata_horizon(node);
    let streams: Vec<_> = state
        .catalog
        .streams()
        .filter(|stream| known_by(horizon, stream.created_at))
        .collect();
    let topics: Vec<_> = streams
        .iter()
        .flat_map(|stream| stream.topics.values())
        .filter(|topic| known_by(horizon, topic.created_at))
        .collect();
    let partitions = topics
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .filter(|partition| known_by(horizon, partition.created_at));
    let (mut partitions_count, mut messages_count, mut messages_size_bytes) = (0u32, 0u64, 0u64);
    for partition in partitions {
        partitions_count += 1;
        messages_count += partition.messages_count(None);
        messages_size_bytes += partition.size_bytes();
    }
    let name = state
        .nodes()
        .get(node)
        .map_or_else(|| format!("node-{node}"), |info| info.name.clone());
    let stats = ServerStats {
        process_id: 1000 + node as u32,
        messages_size_bytes,
        streams_count: streams.len() as u32,
        topics_count: topics.len() as u32,
        partitions_count,
        // One open segment per partition, as every partition reports.
        segments_count: partitions_count,
        messages_count,
        clients_count: clients_of(state, node).len() as u32,
        consumer_groups_count: 0,
        hostname: name,
        os_name: "iggy-route-test".into(),
        os_version: "loopback model".into(),
        kernel_version: String::new(),
        iggy_server_version: SDK_VERSION.into(),
        iggy_server_semver: Some(SERVER_SEMVER),
        threads_count: 1,
        ..ServerStats::default()
    };
    let mut out = BytesMut::with_capacity(stats.encoded_len());
    stats.encode(&mut out);
    Outcome::ok(out.freeze(), state.commit_seen_by(node))
}
