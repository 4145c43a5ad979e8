//! The tokio driver: N nodes on `127.0.0.1:0`, each accepting connections and running one
//! lockstep handler per connection over the shared [`ClusterState`].
//!
//! The driver only moves bytes: it reads frames with `wire::FrameDecoder`, hands each
//! request to the connection's [`NodeConnection`], and writes the one reply back. Every
//! decision is in the sans-IO model. Faults (stopped nodes, dropped connections, slow
//! replies) are applied here because they are about sockets and time.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BytesMut};
use iggy_route_core::wire::{DEFAULT_MAX_FRAME_SIZE, Frame, FrameDecoder, SendMessagesRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::adversary::{Adversary, AdversaryCounts, Misbehaviour, Verdict};
use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::state::{ClusterConfig, ClusterState, NodeId};

/// Per-node runtime: the listener task, the connection tasks and the reply delay.
#[derive(Debug)]
struct NodeRuntime {
    addr: SocketAddr,
    listener: Mutex<Option<JoinHandle<()>>>,
    connections: Mutex<BTreeMap<u64, JoinHandle<()>>>,
    reply_delay: Mutex<Duration>,
}

/// What the driver tasks share with the [`TestCluster`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<ClusterState>,
    nodes: Vec<NodeRuntime>,
    next_connection: AtomicU64,
    /// Misbehaviours switched on through the control API, timed from `started`.
    adversary: Mutex<Adversary>,
    started: Instant,
    /// When sends were refused for not reaching their partition's primary, and which
    /// partition (stream, topic, partition ids), oldest first; at most
    /// [`REFUSAL_LOG_LIMIT`] entries (later ones are not kept).
    refused_sends: Mutex<Vec<RefusedSend>>,
}

/// When a send was refused, and its partition's (stream, topic, partition) ids.
type RefusedSend = (Instant, (u32, u32, u32));

/// Refusals [`TestCluster::refused_sends`] keeps: a client stuck on backups for a whole
/// demo run refuses a few thousand times a second at most, so this covers minutes.
const REFUSAL_LOG_LIMIT: usize = 1_000_000;

impl Shared {
    /// Lock the model. A panic in another test thread must not hide this cluster's state,
    /// so a poisoned lock is used as is.
    pub(crate) fn state(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn node(&self, node: NodeId) -> &NodeRuntime {
        self.nodes
            .get(node)
            .unwrap_or_else(|| panic!("no node {node} in a {}-node cluster", self.nodes.len()))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running loopback cluster. See the module doc; the control and observation methods
/// are in `control.rs`.
#[derive(Debug)]
pub struct TestCluster {
    pub(crate) shared: Arc<Shared>,
}

impl TestCluster {
    /// Start `nodes` nodes (1..=5) on `127.0.0.1:0`; node 0 is the metadata leader.
    ///
    /// # Panics
    /// If a loopback listener cannot be bound, or `nodes` is out of range.
    pub async fn start(nodes: usize) -> TestCluster {
        Self::start_with(ClusterConfig::new(nodes)).await
    }

    /// Start a cluster with explicit settings.
    ///
    /// # Panics
    /// If a loopback listener cannot be bound, or `config.nodes` is out of range.
    pub async fn start_with(config: ClusterConfig) -> TestCluster {
        let mut state = ClusterState::new(&config);
        let mut listeners = Vec::with_capacity(config.nodes);
        let mut runtimes = Vec::with_capacity(config.nodes);
        for node in 0..config.nodes {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .await
                .unwrap_or_else(|error| panic!("bind a loopback port for node {node}: {error}"));
            let addr = listener
                .local_addr()
                .unwrap_or_else(|error| panic!("read the address of node {node}: {error}"));
            state.set_node_addr(node, addr);
            listeners.push(listener);
            runtimes.push(NodeRuntime {
                addr,
                listener: Mutex::new(None),
                connections: Mutex::new(BTreeMap::new()),
                reply_delay: Mutex::new(Duration::ZERO),
            });
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            nodes: runtimes,
            next_connection: AtomicU64::new(1),
            adversary: Mutex::new(Adversary::new(config.nodes)),
            started: Instant::now(),
            refused_sends: Mutex::new(Vec::new()),
        });
        for (node, listener) in listeners.into_iter().enumerate() {
            let task = tokio::spawn(accept_loop(Arc::clone(&shared), node, listener));
            *lock(&shared.node(node).listener) = Some(task);
        }
        TestCluster { shared }
    }

    /// Addresses of all nodes, in roster order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.shared.nodes.iter().map(|node| node.addr).collect()
    }

    /// Address of one node (stable across restarts).
    pub fn addr(&self, node: NodeId) -> SocketAddr {
        self.shared.node(node).addr
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// `iggy://iggy:iggy@127.0.0.1:p0,127.0.0.1:p1,...`: every node, for clients that take
    /// a seed list. The 0.11.0 SDK accepts a single address only: use
    /// [`TestCluster::sdk_connection_string`] for it.
    pub fn connection_string(&self) -> String {
        let addrs: Vec<String> = self.addrs().iter().map(SocketAddr::to_string).collect();
        format!("iggy://iggy:iggy@{}", addrs.join(","))
    }

    /// `iggy://iggy:iggy@127.0.0.1:port` of one node, in the form the 0.11.0 SDK parses.
    pub fn sdk_connection_string(&self, node: NodeId) -> String {
        format!("iggy://iggy:iggy@{}", self.addr(node))
    }

    /// Stop a node: close its listener (new connections are refused) and drop every open
    /// connection. The model keeps its data, as a restarted replica would.
    pub async fn stop_node(&self, node: NodeId) {
        let listener = lock(&self.shared.node(node).listener).take();
        if let Some(task) = listener {
            task.abort();
            // Waiting for the cancelled task guarantees the socket is closed on return.
            let _cancelled = task.await;
        }
        self.shared.state().set_node_running(node, false);
        self.close_connections(node).await;
    }

    /// Restart a stopped node on the same port. A no-op if it is running.
    ///
    /// # Panics
    /// If the port cannot be bound again (another process took it).
    pub async fn restart_node(&self, node: NodeId) {
        let runtime = self.shared.node(node);
        if lock(&runtime.listener).is_some() {
            return;
        }
        let listener = TcpListener::bind(runtime.addr)
            .await
            .unwrap_or_else(|error| panic!("rebind node {node} on {}: {error}", runtime.addr));
        self.shared.state().set_node_running(node, true);
        let task = tokio::spawn(accept_loop(Arc::clone(&self.shared), node, listener));
        *lock(&runtime.listener) = Some(task);
    }

    /// When the sends to partitions of `stream`/`topic` that reached a node other than the
    /// partition's primary were refused, oldest first, with the partition id of each.
    pub fn refused_sends(&self, stream: u32, topic: u32) -> Vec<(Instant, u32)> {
        lock(&self.shared.refused_sends)
            .iter()
            .filter(|(_, (s, t, _))| (*s, *t) == (stream, topic))
            .map(|&(at, (_, _, partition))| (at, partition))
            .collect()
    }

    /// Drop every open connection of a node; it keeps accepting new ones.
    pub fn drop_connections(&self, node: NodeId) {
        let tasks = std::mem::take(&mut *lock(&self.shared.node(node).connections));
        for task in tasks.into_values() {
            task.abort();
        }
    }

    async fn close_connections(&self, node: NodeId) {
        let tasks = std::mem::take(&mut *lock(&self.shared.node(node).connections));
        for task in tasks.into_values() {
            task.abort();
            let _cancelled = task.await;
        }
    }

    /// Hold every reply of `node` for `delay` before writing it (the request is handled at
    /// once; only the answer is late). `Duration::ZERO` turns it off.
    pub fn set_reply_delay(&self, node: NodeId, delay: Duration) {
        *lock(&self.shared.node(node).reply_delay) = delay;
    }

    /// Make `node` misbehave for `lasts` from now (see [`Misbehaviour`]); a later call for
    /// the same behaviour replaces the earlier one, and `Duration::ZERO` ends it.
    pub fn misbehave(&self, node: NodeId, behaviour: Misbehaviour, lasts: Duration) {
        let until = self.shared.started.elapsed() + lasts;
        lock(&self.shared.adversary).set(node, behaviour, until);
    }

    /// What the misbehaving nodes did so far.
    pub fn adversary_counts(&self) -> AdversaryCounts {
        lock(&self.shared.adversary).counts
    }

    /// Stop every node and wait for all tasks to end.
    pub async fn shutdown(self) {
        for node in 0..self.node_count() {
            self.stop_node(node).await;
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for runtime in &self.shared.nodes {
            if let Some(task) = lock(&runtime.listener).take() {
                task.abort();
            }
            for task in std::mem::take(&mut *lock(&runtime.connections)).into_values() {
                task.abort();
            }
        }
    }
}

async fn accept_loop(shared: Arc<Shared>, node: NodeId, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(node, %error, "accept failed");
                continue;
            }
        };
        // Replies are small and lockstep: Nagle would only add latency.
        let _ = stream.set_nodelay(true);
        let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
        debug!(node, connection = id, %peer, "accepted");
        let connection = OpenConnection::open(Arc::clone(&shared), node, id);
        let task = tokio::spawn(serve(connection, stream));
        let mut connections = lock(&shared.node(node).connections);
        connections.retain(|_, task| !task.is_finished());
        connections.insert(id, task);
    }
}

/// A connection's model state plus the cleanup that must run however the task ends
/// (normal close, error, or abort by a fault): `Drop` releases the session.
#[derive(Debug)]
struct OpenConnection {
    shared: Arc<Shared>,
    node: NodeId,
    id: u64,
    model: NodeConnection,
}

impl OpenConnection {
    fn open(shared: Arc<Shared>, node: NodeId, id: u64) -> Self {
        let model = NodeConnection::open(&mut shared.state(), node);
        Self {
            shared,
            node,
            id,
            model,
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.model.close(&mut self.shared.state());
        lock(&self.shared.node(self.node).connections).remove(&self.id);
        debug!(node = self.node, connection = self.id, "closed");
    }
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

async fn serve(mut connection: OpenConnection, mut stream: TcpStream) {
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        let mut input: &[u8] = &buffer;
        let available = input.len();
        let decoded = decoder.decode(&mut input);
        let consumed = available - input.len();
        buffer.advance(consumed);
        match decoded {
            Ok(Some(Frame::Request { header, body })) => {
                let mut commit_delay = Duration::ZERO;
                let reply = {
                    let mut state = connection.shared.state();
                    state.set_now_micros(now_micros());
                    let node = connection.node;
                    let now = connection.shared.started.elapsed();
                    let mut adversary = lock(&connection.shared.adversary);
                    let leads = |send: &SendMessagesRequest, partition: u32| {
                        state
                            .catalog
                            .partition(lookup(&send.stream), lookup(&send.topic), partition)
                            .is_ok_and(|found| found.primary == node)
                    };
                    match adversary.before(node, now, &header, &body, leads) {
                        Verdict::Instead(reply) => Some(reply),
                        Verdict::Model => {
                            let reply = connection.model.handle(&mut state, node, header, body);
                            commit_delay = state.take_reply_commit_delay();
                            if let Some(partition) = state.take_refused_send() {
                                let mut log = lock(&connection.shared.refused_sends);
                                if log.len() < REFUSAL_LOG_LIMIT {
                                    log.push((Instant::now(), partition));
                                }
                            }
                            let addrs: Vec<SocketAddr> =
                                state.nodes().iter().map(|n| n.addr).collect();
                            reply.map(|reply| adversary.reply(node, &addrs, now, &header, reply))
                        }
                    }
                };
                let Some(reply) = reply else {
                    debug!(node = connection.node, "invalid request header, closing");
                    return;
                };
                // A commit waits for its replicas (see `Lag`); the request was handled.
                let delay =
                    *lock(&connection.shared.node(connection.node).reply_delay) + commit_delay;
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if stream.write_all(&reply).await.is_err() {
                    return;
                }
            }
            Ok(Some(other)) => {
                warn!(node = connection.node, frame = ?other, "a client sent a non-request frame");
                return;
            }
            Ok(None) => match stream.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            Err(error) => {
                debug!(node = connection.node, %error, "undecodable frame, closing");
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io;

    use bytes::Bytes;
    use iggy_route_core::wire::{
        LoginRegisterReply, LoginRegisterRequest, Name, Operation, PROTOCOL_VERSION, Password,
        RequestHeader, SDK_NAME, SDK_VERSION, code, decode_one, split_result,
    };

    use super::*;
    use crate::cluster::state::Lag;

    /// Send one request and read the one frame that answers it.
    async fn exchange(
        stream: &mut TcpStream,
        header: RequestHeader,
        body: &[u8],
    ) -> io::Result<Frame> {
        let mut out = BytesMut::new();
        header.encode(&mut out);
        out.extend_from_slice(body);
        stream.write_all(&out).await?;
        let mut frame = vec![0u8; 256];
        stream.read_exact(&mut frame).await?;
        let size = u32::from_le_bytes(frame[48..52].try_into().unwrap()) as usize;
        frame.resize(size, 0);
        stream.read_exact(&mut frame[256..]).await?;
        Ok(decode_one(&frame).unwrap())
    }

    async fn ping(stream: &mut TcpStream) -> io::Result<Frame> {
        let header = RequestHeader::new(Operation::NonReplicated, code::PING, 1, 0, 1, 0);
        exchange(stream, header, &[]).await
    }

    async fn login(stream: &mut TcpStream, client: u128) -> Frame {
        let request = LoginRegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            sdk_name: Name::new(SDK_NAME).unwrap(),
            sdk_version: Name::new(SDK_VERSION).unwrap(),
            username: Name::new("iggy").unwrap(),
            password: Password::new("iggy").unwrap(),
            context: Bytes::new(),
        };
        let mut body = BytesMut::new();
        request.encode(&mut body);
        let header = RequestHeader::new(Operation::Register, 0, client, 0, 0, body.len());
        exchange(stream, header, &body).await.unwrap()
    }

    async fn eventually(mut check: impl FnMut() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("condition not reached within a second");
    }

    #[tokio::test]
    async fn five_nodes_start_answer_and_stop_in_milliseconds() {
        let started = Instant::now();
        let cluster = TestCluster::start(5).await;
        for addr in cluster.addrs() {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            assert!(
                matches!(ping(&mut stream).await.unwrap(), Frame::Reply { header, .. } if header.status == 0)
            );
        }
        cluster.shutdown().await;
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "took {:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_stopped_node_refuses_connections_and_restarts_on_its_port() {
        let cluster = TestCluster::start(2).await;
        let addr = cluster.addr(1);
        let mut open = TcpStream::connect(addr).await.unwrap();
        assert!(matches!(login(&mut open, 9).await, Frame::Reply { .. }));
        assert_eq!(cluster.live_sessions(), 1);

        cluster.stop_node(1).await;
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "a stopped node refuses connections"
        );
        assert!(
            ping(&mut open).await.is_err(),
            "its open connections are dropped"
        );
        assert_eq!(cluster.stats(1).open_connections, 0);
        assert_eq!(
            cluster.live_sessions(),
            0,
            "dropped connections end their sessions"
        );

        cluster.restart_node(1).await;
        assert_eq!(cluster.addr(1), addr);
        let mut again = TcpStream::connect(addr).await.unwrap();
        assert!(ping(&mut again).await.is_ok());
        assert_eq!(cluster.stats(1).connections_total, 2);
    }

    #[tokio::test]
    async fn dropping_connections_keeps_the_node_accepting() {
        let cluster = TestCluster::start(1).await;
        let mut first = TcpStream::connect(cluster.addr(0)).await.unwrap();
        login(&mut first, 3).await;
        cluster.drop_connections(0);
        assert!(ping(&mut first).await.is_err());
        eventually(|| cluster.live_sessions() == 0 && cluster.stats(0).open_connections == 0).await;
        let mut second = TcpStream::connect(cluster.addr(0)).await.unwrap();
        assert!(ping(&mut second).await.is_ok());
        assert_eq!(cluster.stats(0).requests(code::PING), 1);
    }

    #[tokio::test]
    async fn a_reply_delay_holds_every_reply_of_that_node() {
        let cluster = TestCluster::start(2).await;
        cluster.set_reply_delay(0, Duration::from_millis(150));
        let mut slow = TcpStream::connect(cluster.addr(0)).await.unwrap();
        let mut fast = TcpStream::connect(cluster.addr(1)).await.unwrap();
        let started = Instant::now();
        ping(&mut fast).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(100));
        ping(&mut slow).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(150));
        cluster.set_reply_delay(0, Duration::ZERO);
    }

    #[tokio::test]
    async fn a_slow_commit_holds_the_reply_of_the_send_only() {
        // Large enough that a ping on an idle loopback connection answers well within it.
        let slow = Duration::from_millis(800);
        let cluster = TestCluster::start_with(ClusterConfig {
            lag: Lag {
                partition_commit: slow,
                ..Lag::REAL_CLUSTER
            },
            ..ClusterConfig::new(2)
        })
        .await;
        let (stream, topic) = cluster.create_stream_and_topic("s", "t", 1);
        assert_eq!(cluster.primary(stream, topic, 0), Some(0));
        let mut writer = TcpStream::connect(cluster.addr(0)).await.unwrap();
        let Frame::Reply { body, .. } = login(&mut writer, 7).await else {
            panic!("login answered with something other than a reply");
        };
        let session = LoginRegisterReply::decode(split_result(&body).unwrap().unwrap())
            .unwrap()
            .session;
        let mut other = TcpStream::connect(cluster.addr(0)).await.unwrap();

        let body = crate::cluster::testkit::send_body(stream, topic, 0, &["m"]);
        let header = RequestHeader::new(Operation::SendMessages, 0, 7, session, 1, body.len());
        let started = Instant::now();
        let mut sending = tokio::spawn(async move {
            let reply = exchange(&mut writer, header, &body).await.unwrap();
            (reply, started.elapsed())
        });
        eventually(|| cluster.partition_len(stream, topic, 0) == 1).await;
        // The send is applied and its reply is waiting for the commit: the same node still
        // answers another connection at once.
        tokio::select! {
            biased;
            _ = &mut sending => panic!("the send's reply came before a ping on another connection"),
            pinged = ping(&mut other) => assert!(pinged.is_ok()),
        }
        let (reply, took) = sending.await.unwrap();
        assert!(matches!(reply, Frame::Reply { header, .. } if header.status == 0));
        assert!(took >= slow, "the send's reply came after {took:?}");
    }

    #[tokio::test]
    async fn an_undecodable_frame_closes_the_connection() {
        let cluster = TestCluster::start(1).await;
        let mut stream = TcpStream::connect(cluster.addr(0)).await.unwrap();
        let mut garbage = vec![0u8; 256];
        garbage[48] = 10; // size 10 < 256
        stream.write_all(&garbage).await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(stream.read(&mut byte).await.unwrap_or(0), 0);
    }
}
