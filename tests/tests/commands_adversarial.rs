//! Adversarial tests of the whole command set of both adapters' `Client`, from the outside:
//! a hostile caller (bad input, reads racing its own writes, names reused, credentials it
//! hopes to see in logs) and a hostile network (replies late past the attempt timeout,
//! connections dropped mid-write, replies written twice, nodes that fall silent).
//!
//! Each scenario runs through `iggy_route_tokio::Client` and `iggy_route_mio::Client`
//! (`<scenario>::tokio` and `<scenario>::mio`) against the loopback cluster, whose followers
//! lag as the real ones do; the `real_*` tests run the shared scenarios against the real
//! cluster named by `IGGY_ROUTE_REAL_CLUSTER` and pass, printing that they were skipped,
//! without it.
//!
//! What the loopback cluster lets a test see that a real one does not: how many requests of
//! each command reached each node. That is how "goes to the leader / the primary / the
//! session's node" and "sends nothing" are asserted here.
//!
//! Written by a reviewer who had not read the client's code. The bugs it found (a logged-out
//! session never signed in again for the router's own reads, a redial storm against a node
//! that breaks the protocol after its sign-in, nested link spans in the blocking client, an
//! unchecked username on `update_user`) are fixed, and their tests run with the rest.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Once, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::{Call, ClientError};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ChangePasswordRequest, Consumer, ConsumerKind, CreateUserRequest, ErrorCode, GlobalPermissions,
    Identifier, Message, Password, Permissions, PollingStrategy, StreamPermissions, TokenExpiry,
    TopicUpdateOptions, UserStatus, code,
};
use iggy_route_core::{Config, Credentials, Reply, ReplyPayload, RequestError};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tests::real_cluster::{RealCluster, unique_name};
use tokio::runtime::Runtime;

// ---------------------------------------------------------------------------------------
// Log capture and ERROR counting: one process-wide subscriber for this binary.
// ---------------------------------------------------------------------------------------

/// While above zero, every event and span at every level is written to `CAPTURED`.
static CAPTURING: AtomicUsize = AtomicUsize::new(0);
static CAPTURED: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// ERROR events (in this project: a bug of the router or an adapter), whenever logged.
static ERRORS: AtomicU64 = AtomicU64::new(0);
static FIRST_ERROR: Mutex<Option<String>> = Mutex::new(None);
static INSTALL: Once = Once::new();
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);
/// Each span's depth (1 for a span without a parent), for the spans made while capturing.
static SPAN_DEPTHS: Mutex<BTreeMap<u64, usize>> = Mutex::new(BTreeMap::new());
/// Every `link` span made while capturing: its fields as text and its depth.
static LINK_SPANS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

thread_local! {
    /// The spans this thread is in, innermost last.
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

struct FieldText<'a>(&'a mut String);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

/// This binary's subscriber: counts ERROR events always, and while `CAPTURING` writes every
/// event and every span's fields, at every level, to `CAPTURED` (one line each). It keeps no
/// span tree of its own (only each span's depth), so what the adapters do with spans cannot
/// take the test process down with it.
struct Capture;

impl Capture {
    fn capturing() -> bool {
        CAPTURING.load(Ordering::SeqCst) > 0
    }

    fn write_line(line: &str) {
        let mut captured = lock(&CAPTURED);
        captured.extend_from_slice(line.as_bytes());
        captured.push(b'\n');
    }
}

impl tracing::Subscriber for Capture {
    fn register_callsite(
        &self,
        _metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // Asked again at every use: capturing starts and stops.
        tracing::subscriber::Interest::sometimes()
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR || Self::capturing()
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = NEXT_SPAN.fetch_add(1, Ordering::SeqCst);
        let parent = if let Some(parent) = span.parent() {
            Some(parent.into_u64())
        } else if span.is_contextual() {
            ENTERED.with(|entered| entered.borrow().last().copied())
        } else {
            None
        };
        let mut depths = lock(&SPAN_DEPTHS);
        let depth = parent.and_then(|p| depths.get(&p).copied()).unwrap_or(0) + 1;
        depths.insert(id, depth);
        drop(depths);
        let metadata = span.metadata();
        let mut text = format!(
            "{} span {} {}: ",
            metadata.level(),
            metadata.target(),
            metadata.name()
        );
        span.record(&mut FieldText(&mut text));
        if metadata.name() == "link" {
            lock(&LINK_SPANS).push((text.clone(), depth));
        }
        if Self::capturing() {
            Self::write_line(&text);
        }
        tracing::span::Id::from_u64(id)
    }

    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        if Self::capturing() {
            let mut text = format!("record span {}: ", span.into_u64());
            values.record(&mut FieldText(&mut text));
            Self::write_line(&text);
        }
    }

    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let metadata = event.metadata();
        let mut text = format!("{} {}: ", metadata.level(), metadata.target());
        event.record(&mut FieldText(&mut text));
        if *metadata.level() == tracing::Level::ERROR {
            ERRORS.fetch_add(1, Ordering::SeqCst);
            lock(&FIRST_ERROR).get_or_insert(text.clone());
        }
        if Self::capturing() {
            Self::write_line(&text);
        }
    }

    fn enter(&self, span: &tracing::span::Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &tracing::span::Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
                entered.remove(at);
            }
        });
    }
}

fn install() {
    INSTALL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(Capture);
    });
}

/// Captures every log line while it lives.
struct Capturing;

fn capture() -> Capturing {
    install();
    CAPTURING.fetch_add(1, Ordering::SeqCst);
    Capturing
}

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURING.fetch_sub(1, Ordering::SeqCst);
    }
}

fn assert_no_errors() {
    let count = ERRORS.load(Ordering::SeqCst);
    assert_eq!(
        count,
        0,
        "{count} ERROR events were logged; the first: {:?}",
        lock(&FIRST_ERROR)
    );
}

/// Aborts the whole process if a test outlives its bound: a hang is a failure, never a
/// test run that does not end.
struct Watchdog(Arc<AtomicBool>);

fn watchdog(test: &'static str, limit: Duration) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&done);
    std::thread::spawn(move || {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if seen.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{test}: still running after {limit:?}: a call hung; aborting");
        std::process::abort();
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// Both adapters behind one face.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    Tokio,
    Mio,
}

/// The runtime every async client of this binary runs on (the test threads call
/// `block_on`; none of them is a worker of it).
static TOKIO: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

/// A call of the async client that has not ended by then has hung.
const HANG_LIMIT: Duration = Duration::from_secs(90);

#[derive(Debug)]
enum Inner {
    Tokio(iggy_route_tokio::Client),
    Mio(iggy_route_mio::Client),
}

/// A client of either adapter; shut down when dropped.
#[derive(Debug)]
struct Cl {
    inner: Inner,
}

impl Cl {
    fn connect(adapter: Adapter, config: Config) -> Result<Cl, ClientError> {
        let inner = match adapter {
            Adapter::Tokio => Inner::Tokio(TOKIO.block_on(async {
                tokio::time::timeout(HANG_LIMIT, iggy_route_tokio::Client::connect(config))
                    .await
                    .unwrap_or_else(|_| panic!("connect hung"))
            })?),
            Adapter::Mio => Inner::Mio(iggy_route_mio::Client::connect(config)?),
        };
        Ok(Cl { inner })
    }

    fn stats(&self) -> iggy_route_core::Stats {
        match &self.inner {
            Inner::Tokio(client) => client.stats(),
            Inner::Mio(client) => client.stats(),
        }
    }
}

impl Drop for Cl {
    fn drop(&mut self) {
        match &self.inner {
            Inner::Tokio(client) => TOKIO.block_on(client.shutdown()),
            Inner::Mio(client) => client.shutdown(),
        }
    }
}

/// `call!(client, method(args...))`: the method of whichever adapter `client` is, blocking.
macro_rules! call {
    ($client:expr, $method:ident($($arg:expr),* $(,)?)) => {{
        let client: &Cl = &$client;
        match &client.inner {
            Inner::Tokio(inner) => TOKIO.block_on(async {
                match tokio::time::timeout(HANG_LIMIT, inner.$method($($arg),*)).await {
                    Ok(result) => result,
                    Err(_) => panic!("{} hung past {:?}", stringify!($method), HANG_LIMIT),
                }
            }),
            Inner::Mio(inner) => inner.$method($($arg),*),
        }
    }};
}

/// One test per adapter for a scenario `fn name(adapter: Adapter)`: `name::tokio`,
/// `name::mio`.
macro_rules! both_adapters {
    ($(#[$meta:meta])* $name:ident) => {
        mod $name {
            $(#[$meta])*
            #[test]
            fn tokio() {
                super::$name(super::Adapter::Tokio);
            }

            $(#[$meta])*
            #[test]
            fn mio() {
                super::$name(super::Adapter::Mio);
            }
        }
    };
}

// ---------------------------------------------------------------------------------------
// Small helpers.
// ---------------------------------------------------------------------------------------

fn quick(mut config: Config) -> Config {
    config.connect_timeout = Duration::from_millis(1_500);
    config.request_timeout = Duration::from_secs(8);
    config.attempt_timeout = Duration::from_secs(3);
    config.reconnect_backoff_initial = Duration::from_millis(10);
    config.reconnect_backoff_max = Duration::from_millis(200);
    config
}

fn with_credentials(mut config: Config, credentials: Credentials) -> Config {
    config.credentials = credentials;
    config
}

fn user(name: &str, password: &str) -> Credentials {
    Credentials::user(name, password).unwrap()
}

fn consumer(id: u32) -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(id),
    }
}

fn messages(prefix: &str, count: usize) -> Vec<Message> {
    (0..count)
        .map(|index| Message {
            payload: Bytes::from(format!("{prefix}-{index}")),
            ..Message::default()
        })
        .collect()
}

fn payloads(polled: &iggy_route_core::wire::PollMessagesReply) -> Vec<String> {
    polled
        .messages
        .iter()
        .map(|message| String::from_utf8_lossy(&message.payload).into_owned())
        .collect()
}

fn code_name(code: ErrorCode) -> String {
    code.name()
        .map_or_else(|| format!("code {}", code.as_u32()), str::to_owned)
}

/// "ok", the server's code by name, or the error's `Debug`.
fn outcome<T>(result: &Result<T, ClientError>) -> String {
    let Err(error) = result else {
        return "ok".to_owned();
    };
    if let ClientError::Request(RequestError::Server { code }) = error {
        return code_name(*code);
    }
    format!("{error:?}")
}

fn server_code<T: Debug>(result: Result<T, ClientError>) -> ErrorCode {
    if let Err(ClientError::Request(RequestError::Server { code })) = &result {
        return *code;
    }
    panic!("expected a status from the server, got {result:?}")
}

/// The caller's bad input, refused before anything was sent.
fn refused_locally<T>(result: &Result<T, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Invalid(_) | ClientError::Submit(_))
    )
}

/// A write whose outcome the client could not know (its link closed or its deadline
/// passed while it was in flight): the only failures a write may report when the network,
/// not the server, failed it.
fn unknown_outcome<T>(result: &Result<T, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Request(
            RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { .. }
        ))
    )
}

/// A typed answer that a stream, topic or partition is not there: the server's status, or
/// the router's own typed not-found / out-of-range.
fn typed_not_found<T>(result: &Result<T, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Request(
            RequestError::Server { .. }
                | RequestError::TopicNotFound { .. }
                | RequestError::PartitionOutOfRange { .. }
        ))
    )
}

/// The secret in every form a log line could carry it: as text, as hex and as the decimal
/// bytes a `Debug` of a byte slice prints.
fn secret_forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    let spaced: Vec<String> = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    let decimal: Vec<String> = bytes.iter().map(u8::to_string).collect();
    vec![
        secret.to_owned(),
        hex.clone(),
        hex.to_uppercase(),
        spaced.join(" "),
        decimal.join(", "),
    ]
}

fn leaks(text: &str, secret: &str) -> Vec<String> {
    let forms = secret_forms(secret);
    text.lines()
        .filter(|line| forms.iter().any(|form| line.contains(form.as_str())))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The loopback cluster and a place to run a scenario.
// ---------------------------------------------------------------------------------------

/// Moves the primaries of a topic's partitions (stream, topic, partition count).
type Spread = Box<dyn Fn(u32, u32, u32) + Send + Sync>;

/// Where a scenario runs: the root configuration (its first seed is the session's node)
/// and a prefix for names no other run used.
struct Place {
    root: Config,
    prefix: String,
    /// Spreads the primaries of a topic's partitions over the nodes, where the cluster can.
    spread: Option<Spread>,
    /// How long a user or token written by one client takes at most to reach a node
    /// another client signs in on (zero on the loopback cluster, whose users do not lag).
    settle: Duration,
}

impl Place {
    fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }

    fn config_as(&self, credentials: Credentials) -> Config {
        let mut config = self.root.clone();
        config.credentials = credentials;
        config
    }

    fn spread(&self, stream: u32, topic: u32, partitions: u32) {
        if let Some(spread) = &self.spread {
            spread(stream, topic, partitions);
        }
    }

    /// Connects, again while the sign-in is refused, for `settle` (a user just created
    /// may not have reached the node the client signs in on).
    fn connect_as(&self, adapter: Adapter, credentials: Credentials) -> Cl {
        let config = self.config_as(credentials);
        let by = Instant::now() + self.settle + Duration::from_millis(100);
        loop {
            match Cl::connect(adapter, config.clone()) {
                Ok(client) => return client,
                Err(error) => {
                    let refused =
                        matches!(&error, ClientError::Request(RequestError::SignIn { .. }));
                    assert!(
                        refused && Instant::now() < by,
                        "connect as a user just created: {error:?}"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Whether `credentials` are refused at sign-in once a change that refuses them has had
    /// `settle` to reach every node.
    fn refused_at_sign_in(&self, adapter: Adapter, credentials: Credentials) -> bool {
        let config = self.config_as(credentials);
        let by = Instant::now() + self.settle + Duration::from_millis(100);
        loop {
            let result = Cl::connect(adapter, config.clone());
            if matches!(
                &result,
                Err(ClientError::Request(RequestError::SignIn { .. }))
            ) {
                return true;
            }
            drop(result);
            if Instant::now() >= by {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

struct World {
    cluster: Arc<TestCluster>,
    rt: Runtime,
}

const LEADER: usize = 0;

fn world() -> World {
    install();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = Arc::new(rt.block_on(TestCluster::start(3)));
    assert_eq!(cluster.metadata_leader(), LEADER);
    World { cluster, rt }
}

impl World {
    /// Root's configuration with its session on `session_node` (the first seed).
    fn config(&self, session_node: usize) -> Config {
        let mut seeds: Vec<String> = self
            .cluster
            .addrs()
            .iter()
            .map(ToString::to_string)
            .collect();
        seeds.rotate_left(session_node);
        quick(Config::new(seeds, user("iggy", "iggy")))
    }

    fn connect(&self, adapter: Adapter, session_node: usize) -> Cl {
        Cl::connect(adapter, self.config(session_node)).unwrap()
    }

    /// A place whose session is on `session_node` and whose topics' partitions have their
    /// primaries spread: partition `p` on node `(p + 1) % 3`.
    fn place(&self, session_node: usize, prefix: &str) -> Place {
        let cluster = Arc::clone(&self.cluster);
        Place {
            root: self.config(session_node),
            prefix: prefix.to_owned(),
            spread: Some(Box::new(move |stream, topic, partitions| {
                for partition in 0..partitions {
                    let node = usize::try_from(partition + 1).unwrap() % 3;
                    assert!(cluster.set_primary(stream, topic, partition, node));
                }
            })),
            // A follower knows a user's new password (or a new user) once its metadata copy
            // catches up, 200 ms after the leader in the model, as on a real cluster.
            settle: Duration::from_millis(300),
        }
    }

    /// How many streams the model holds under `name`.
    fn with_streams_named(&self, name: &str) -> usize {
        self.cluster.with_state(|state| {
            usize::from(
                state
                    .catalog
                    .stream(iggy_route_tests::cluster::Lookup::Name(name))
                    .is_some(),
            )
        })
    }

    fn requests(&self, node: usize, command: u32) -> u64 {
        self.cluster.stats(node).requests(command)
    }

    /// Requests of each command on each node, leaving out what a client sends on its own
    /// (sign-ins, heartbeats, roster reads).
    fn traffic(&self) -> BTreeMap<(usize, u32), u64> {
        let mut all = BTreeMap::new();
        for node in 0..self.cluster.node_count() {
            for (command, count) in self.cluster.stats(node).requests_by_code {
                let own = [
                    code::PING,
                    code::LOGIN_REGISTER,
                    code::LOGIN_REGISTER_WITH_PAT,
                    code::GET_CLUSTER_METADATA,
                ];
                if !own.contains(&command) {
                    all.insert((node, command), count);
                }
            }
        }
        all
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_no_errors();
        }
    }
}

#[path = "commands_adversarial/concurrency_and_secrets.rs"]
mod concurrency_and_secrets;
#[path = "commands_adversarial/deleted_and_renamed.rs"]
mod deleted_and_renamed;
#[path = "commands_adversarial/hostile_network.rs"]
mod hostile_network;
#[path = "commands_adversarial/offsets_logout_tokens.rs"]
mod offsets_logout_tokens;
#[path = "commands_adversarial/own_writes.rs"]
mod own_writes;
#[path = "commands_adversarial/permissions.rs"]
mod permissions;
#[path = "commands_adversarial/planes_and_input.rs"]
mod planes_and_input;
#[path = "commands_adversarial/real.rs"]
mod real;
#[path = "commands_adversarial/secrets.rs"]
mod secrets;

// The scenarios of one section are run by others (the real cluster runs the loopback's).
#[allow(unused_imports, clippy::wildcard_imports)]
use self::{
    concurrency_and_secrets::*, deleted_and_renamed::*, hostile_network::*,
    offsets_logout_tokens::*, own_writes::*, permissions::*, planes_and_input::*, real::*,
    secrets::*,
};
