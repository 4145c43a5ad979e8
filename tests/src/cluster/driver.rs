//! The tokio driver: N nodes on `127.0.0.1:0`, each accepting connections and running one
//! lockstep handler per connection over the shared [`ClusterState`].
//!
//! The driver only moves bytes: it reads frames with `wire::FrameDecoder`, hands each
//! request to the connection's [`NodeConnection`], and writes the one reply back. Every
//! decision is in the sans-IO model. Faults (stopped nodes, dropped connections, slow
//! replies) are applied here because they are about sockets and time. A TLS cluster
//! (`ClusterConfig::tls`) runs each accepted socket through the handshake first (`tls.rs`)
//! and then serves the same frames over the TLS stream.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BytesMut};
use iggy_route_core::wire::{DEFAULT_MAX_FRAME_SIZE, Frame, FrameDecoder, SendMessagesRequest};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::adversary::{Adversary, AdversaryCounts, Misbehaviour, Verdict};
use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::state::{ClusterConfig, ClusterState, NodeId};
use super::tls::ServerTls;

/// Per-node runtime: the listener task, the connection tasks and the reply delay.
#[derive(Debug)]
struct NodeRuntime {
    addr: SocketAddr,
    listener: Mutex<Option<JoinHandle<()>>>,
    connections: Mutex<BTreeMap<u64, JoinHandle<()>>>,
    reply_delay: Mutex<Duration>,
    /// Paused (a stopped process): the kernel still accepts and buffers, nothing is served.
    paused: watch::Sender<bool>,
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
    /// The certificate and acceptor every node serves TLS with; `None`: plaintext.
    tls: Option<ServerTls>,
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

    pub(crate) fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }

    /// Returns once `node` is not paused (at once when it is not).
    async fn running(&self, node: NodeId) {
        let mut paused = self.node(node).paused.subscribe();
        // The sender lives as long as `self`, so the wait ends only with a resume.
        let _resumed = paused.wait_for(|paused| !*paused).await;
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
    /// If a loopback listener cannot be bound, `config.nodes` is out of range, or (with
    /// `config.tls`) the certificates cannot be made or `ca.pem` written.
    pub async fn start_with(config: ClusterConfig) -> TestCluster {
        Self::try_start_on(config, None)
            .await
            .unwrap_or_else(|error| panic!("start the loopback cluster: {error}"))
    }

    /// Start a cluster with explicit settings, node `N` listening on `127.0.0.1` at port
    /// `port_base + N`, or on a port the OS picks when `port_base` is `None`.
    ///
    /// # Errors
    /// If a listener cannot be bound (a port is taken, or `port_base + N` is past 65535),
    /// or (with `config.tls`) the certificates cannot be made or `ca.pem` written.
    ///
    /// # Panics
    /// If `config.nodes` is out of range.
    pub async fn try_start_on(
        config: ClusterConfig,
        port_base: Option<u16>,
    ) -> io::Result<TestCluster> {
        let tls = match config.tls.as_ref() {
            Some(certificate) => Some(ServerTls::new(certificate).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("make the cluster's TLS certificates: {error}"),
                )
            })?),
            None => None,
        };
        let mut state = ClusterState::new(&config);
        let mut listeners = Vec::with_capacity(config.nodes);
        let mut runtimes = Vec::with_capacity(config.nodes);
        for node in 0..config.nodes {
            let port = match port_base {
                Some(base) => u16::try_from(node)
                    .ok()
                    .and_then(|offset| base.checked_add(offset))
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("no port {base} + {node} for node {node}"),
                        )
                    })?,
                None => 0,
            };
            let bound = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await;
            let listener = bound.map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("bind 127.0.0.1:{port} for node {node}: {error}"),
                )
            })?;
            let addr = listener.local_addr()?;
            state.set_node_addr(node, addr);
            listeners.push(listener);
            runtimes.push(NodeRuntime {
                addr,
                listener: Mutex::new(None),
                connections: Mutex::new(BTreeMap::new()),
                reply_delay: Mutex::new(Duration::ZERO),
                paused: watch::Sender::new(false),
            });
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            nodes: runtimes,
            next_connection: AtomicU64::new(1),
            adversary: Mutex::new(Adversary::new(config.nodes)),
            started: Instant::now(),
            refused_sends: Mutex::new(Vec::new()),
            tls,
        });
        for (node, listener) in listeners.into_iter().enumerate() {
            let task = tokio::spawn(accept_loop(Arc::clone(&shared), node, listener));
            *lock(&shared.node(node).listener) = Some(task);
        }
        Ok(TestCluster { shared })
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
    /// a seed list; a TLS cluster's ends in [`TestCluster::tls_options`] after a `?`. The
    /// 0.11.0 SDK accepts a single address only: use [`TestCluster::sdk_connection_string`]
    /// for it.
    pub fn connection_string(&self) -> String {
        let addrs: Vec<String> = self.addrs().iter().map(SocketAddr::to_string).collect();
        self.with_tls_options(format!("iggy://iggy:iggy@{}", addrs.join(",")))
    }

    /// `iggy://iggy:iggy@127.0.0.1:port` of one node, in the form the 0.11.0 SDK parses
    /// (with the TLS options of a TLS cluster, which it parses too).
    pub fn sdk_connection_string(&self, node: NodeId) -> String {
        self.with_tls_options(format!("iggy://iggy:iggy@{}", self.addr(node)))
    }

    fn with_tls_options(&self, plain: String) -> String {
        match self.tls_options() {
            Some(options) => format!("{plain}?{options}"),
            None => plain,
        }
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
        // A killed process is not paused any more; it starts again running.
        self.shared.node(node).paused.send_replace(false);
    }

    /// Pause a node, as SIGSTOP pauses a server process: its connections stay open and new
    /// ones are still accepted (the kernel completes the handshake and buffers what the
    /// client writes), but it reads, handles and answers nothing until [`Self::resume_node`].
    /// Requests it had already handled have their replies held too. What a paused node was
    /// sent is handled after the resume, with the cluster's state as it then is, even on a
    /// connection the client has closed meanwhile: a closed socket's unread bytes are still
    /// read. Electing other primaries while it is paused is the caller's (`set_primary`).
    pub fn pause_node(&self, node: NodeId) {
        self.shared.node(node).paused.send_replace(true);
    }

    /// Let a paused node go on where it stopped. A no-op if it is not paused.
    pub fn resume_node(&self, node: NodeId) {
        self.shared.node(node).paused.send_replace(false);
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
        let task = if shared.tls.is_some() {
            tokio::spawn(serve_tls(Arc::clone(&shared), node, id, stream))
        } else {
            let connection = OpenConnection::open(Arc::clone(&shared), node, id);
            tokio::spawn(serve(connection, stream))
        };
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

/// The wall-clock time (µs since the epoch), the model's clock under this driver.
pub(super) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Serves one connection of a TLS cluster: the handshake, then the frames as over plain
/// TCP. The connection joins the model only once the handshake succeeded, so a client that
/// never got through (plaintext, or rejecting the certificate) has no session or stats.
async fn serve_tls(shared: Arc<Shared>, node: NodeId, id: u64, stream: TcpStream) {
    let Some(tls) = shared.tls() else {
        return;
    };
    shared.running(node).await;
    let Some(stream) = tls.accept(node, id, stream).await else {
        return;
    };
    let connection = OpenConnection::open(Arc::clone(&shared), node, id);
    serve(connection, stream).await;
}

/// Serves frames until the client closes, a fault or a bad frame ends the connection.
/// Generic so that plain TCP runs exactly the code it ran before TLS existed.
async fn serve<S>(mut connection: OpenConnection, mut stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        // A paused node neither reads nor handles: what the client sends waits in buffers.
        connection.shared.running(connection.node).await;
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
                    let leader = state.metadata_leader() == node;
                    match adversary.before(node, now, (&header, &body), leader, leads) {
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
                // A node paused after it handled the request answers once resumed.
                connection.shared.running(connection.node).await;
                // TLS holds the reply's records until flushed; flushing TCP does nothing.
                if stream.write_all(&reply).await.is_err() || stream.flush().await.is_err() {
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
