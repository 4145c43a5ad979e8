//! The application's handle: cheap to clone, usable from many tasks at once.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[cfg(feature = "sdk")]
use iggy_route_core::Credentials;
use iggy_route_core::client::consumer::{ConsumerState, GroupClaims, StartConsumer};
use iggy_route_core::client::{Admission, Call, Checked, ClientError, ConnectWait};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{Config, Reply, Request, Router, SendReceipt, Stats};
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, info_span};

use crate::consumer::{ConsumerBuilder, TopicConsumer};
use crate::driver::{Command, Driver, IO_QUEUE_LEN};
use crate::producer::ProducerBuilder;
use crate::session_wait::wait_for_session;
use crate::tls::Tls;

/// Where the driver answers one handed-off request.
pub(crate) type Answer = oneshot::Receiver<Result<Reply, ClientError>>;

/// Requests waiting for the driver to take them. The router's own queues (and the line of
/// requests waiting for room in them) are the real bound; this only smooths bursts.
const COMMAND_QUEUE_LEN: usize = 1024;

/// An Iggy client whose every request goes to the node that can admit it. See the crate
/// documentation.
#[derive(Debug, Clone)]
pub struct Client {
    commands: mpsc::Sender<Command>,
    stats: Arc<Mutex<Stats>>,
    /// The consumer groups this client's consumers are members of.
    claims: GroupClaims,
    /// How long a request may wait for room in the router (`Config::request_timeout`).
    request_timeout: Duration,
    /// What the SDK's `Client` trait keeps beyond the native client (its session state,
    /// its events, its consumer-group cursors): see the `sdk` module.
    #[cfg(feature = "sdk")]
    sdk: Arc<crate::sdk::SdkState>,
    /// Seals payloads and user headers on send and opens them on poll through the SDK's
    /// traits, as the SDK's `IggyClient` does with one: see [`Client::with_encryptor`].
    #[cfg(feature = "sdk")]
    encryptor: Option<Arc<iggy_common::EncryptorKind>>,
}

/// Writes an async method of [`Client`] for each entry of
/// [`for_each_operation!`](iggy_route_core::for_each_operation).
macro_rules! methods {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $answer:ty = $call:expr;
    )*) => {$(
        $(#[$meta])*
        pub async fn $name(&self, $($arg: $ty),*) -> Result<$answer, ClientError> {
            self.run($call).await
        }
    )*};
}

impl Client {
    /// Starts the driver task and returns once the session has signed in on a node of
    /// `config.seeds`. Fails with `ClientError::ConnectTimedOut` when no node answered
    /// within a few `config.connect_timeout`s, and with `RequestError::SignIn` when the
    /// credentials were refused.
    ///
    /// With `config.tls`, every link is TLS (1.3 or 1.2), and `connect` fails with
    /// `ClientError::Tls`:
    /// - before any I/O, for a CA file that cannot be read or holds no certificate
    ///   (`TlsError::CaFile`), or a name to verify that is no DNS name or IP address
    ///   (`TlsError::InvalidServerName`);
    /// - as soon as a node's certificate is refused (`NameMismatch`,
    ///   `CertificateRejected`): dialling again would not change it;
    /// - with `TlsError::NotTls` once every seed has shown it does not speak TLS, without
    ///   waiting out the budget (until then the router tries the next seed). A node shows
    ///   it by answering the ClientHello with bytes that are no TLS, by closing the
    ///   connection on it, or, as a plaintext Iggy node does, by waiting in silence for the
    ///   rest of a 256-byte header: a handshake without a result after a quarter of
    ///   `connect_timeout` (at most 1 s) is checked with a plaintext `PING` on a second
    ///   connection, without credentials, and an Iggy answer to it settles the question;
    /// - with the last TLS failure seen (such as `HandshakeTimedOut`) instead of
    ///   `ConnectTimedOut` when the budget runs out after one.
    ///
    /// After `connect`, a link whose handshake fails is handled by the router like any
    /// failed connect; it is logged, as a warning when retrying will not mend it (a
    /// certificate or configuration problem, a node that does not speak TLS).
    ///
    /// # Panics
    /// Outside a tokio runtime (the driver task is spawned on the current one).
    pub async fn connect(config: Config) -> Result<Client, ClientError> {
        config.validate()?;
        let tls = match &config.tls {
            Some(settings) => Some(Arc::new(Tls::new(&config, settings)?)),
            None => None,
        };
        let budget = ConnectWait::new(&config).budget();
        let request_timeout = config.request_timeout;
        let router = Router::new(config.clone(), entropy_seed()?, Instant::now());
        let (commands, command_queue) = mpsc::channel(COMMAND_QUEUE_LEN);
        let (io_events, io_queue) = mpsc::channel(IO_QUEUE_LEN);
        let stats = Arc::new(Mutex::new(Stats::default()));
        let (session_ready, session_signal) = oneshot::channel();
        // Weak: the claims must not keep the driver alive once every client is dropped.
        let wake = commands.downgrade();
        let claims = GroupClaims::new(move || {
            if let Some(commands) = wake.upgrade() {
                // A full queue means the driver is busy: it looks at its next sweep.
                let _ = commands.try_send(Command::EndMemberships);
            }
        });
        let driver = Driver::new(
            &config,
            router,
            io_events,
            Arc::clone(&stats),
            session_ready,
            tls,
            claims.clone(),
        );
        #[cfg(feature = "sdk")]
        let sdk = Arc::new(crate::sdk::SdkState::new(&config));
        #[cfg(feature = "sdk")]
        let driver = driver.with_diagnostics(sdk.diagnostics());
        let span = info_span!("iggy_route");
        tokio::spawn(driver.run(command_queue, io_queue).instrument(span));
        let client = Client {
            commands,
            stats,
            claims,
            request_timeout,
            #[cfg(feature = "sdk")]
            sdk,
            #[cfg(feature = "sdk")]
            encryptor: None,
        };
        // The driver answers as soon as the core reports the session signed in, or the
        // credentials refused for good, or a TLS handshake failed in a way that retrying
        // will not mend; nodes that cannot be reached are the core's to retry, within the
        // budget.
        let outcome = wait_for_session(session_signal, budget, || client.shutdown()).await;
        match outcome {
            Ok(()) => Ok(client),
            Err(error) => {
                client.shutdown().await;
                Err(error)
            }
        }
    }

    /// [`Client::connect`] with Iggy's connection string,
    /// `iggy://user:password@host:port[,host:port...]`.
    pub async fn from_connection_string(value: &str) -> Result<Client, ClientError> {
        Self::connect(Config::from_connection_string(value)?).await
    }

    iggy_route_core::for_each_operation!(methods);

    iggy_route_core::builder_methods!(ProducerBuilder, ConsumerBuilder);

    /// [`Client::send`] that never waits for room: when the router's queues are full, or
    /// other requests are already waiting for room, it fails at once with
    /// `ClientError::QueueFull` and nothing is sent.
    pub async fn try_send(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitioning: Partitioning,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        let call = Call::send(stream, topic, partitioning, messages)?;
        self.run_with(call, Admission::AtOnce).await
    }

    /// Counters since the client connected: sends, refusals, lookups, reconnects, session
    /// moves.
    pub fn stats(&self) -> Stats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails every pending request with `RequestError::Shutdown` (a write already on the
    /// wire, which its node may have admitted, with `RequestError::OutcomeUnknown`), closes
    /// every connection and stops the driver. Every clone sees `ClientError::Closed` afterwards.
    pub async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Shutdown { done }).await.is_ok() {
            let _ = finished.await;
        }
    }

    /// Signs in as `credentials` from now on (see `Router::sign_in_as`): every call made
    /// after this one returns runs signed in as them.
    #[cfg(feature = "sdk")]
    pub(crate) async fn sign_in_as(&self, credentials: Credentials) -> Result<(), ClientError> {
        self.commands
            .send(Command::SignInAs(credentials))
            .await
            .map_err(|_closed| ClientError::Closed)
    }

    /// Any request: submitted to the router, answered when it completes.
    ///
    /// When the router's queues are full (`Config::max_pending_requests` in all, or
    /// `Config::max_pending_per_lane` for the request's partition), the request waits for
    /// room in the router's line, behind every request that waits already, and is let in
    /// as soon as room frees up. It waits at most `Config::request_timeout` from this call,
    /// then fails with `ClientError::QueueFull`; so does a call that finds
    /// `max_pending_requests` requests waiting already. Every operation method waits so.
    /// Once the router takes the request, its own `request_timeout` runs from then, so a
    /// request that waited for room may take up to twice `request_timeout` in all.
    pub async fn request(&self, request: Request) -> Result<Reply, ClientError> {
        self.submit(
            request,
            Admission::wait_for_room(Instant::now(), self.request_timeout),
        )
        .await
    }

    /// [`Client::request`] that never waits for room: `ClientError::QueueFull` at once when
    /// the router has none, or when other requests wait for room (a try never jumps the
    /// line).
    pub async fn try_request(&self, request: Request) -> Result<Reply, ClientError> {
        self.submit(request, Admission::AtOnce).await
    }

    async fn submit(&self, request: Request, admission: Admission) -> Result<Reply, ClientError> {
        let answer = self.hand_off(request, admission).await?;
        // Bounded by the router: a waiting request leaves its line by its deadline, and an
        // accepted one completes within its request timeout.
        answer.await.map_err(|_| ClientError::Closed)?
    }

    /// Hands a request to the driver and returns where its answer will come, without
    /// waiting for it: requests handed off one after another from one task reach the
    /// router in that order (a producer submits its batches so, several in flight).
    pub(crate) async fn hand_off(
        &self,
        request: Request,
        admission: Admission,
    ) -> Result<Answer, ClientError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Submit {
            request,
            reply,
            admission,
        };
        match admission {
            Admission::WaitForRoom { deadline } => {
                // The hand-off to the driver counts against the same deadline.
                let handed = tokio::time::timeout_at(deadline.into(), self.commands.send(command));
                match handed.await {
                    Ok(Ok(())) => Ok(answer),
                    Ok(Err(_closed)) => Err(ClientError::Closed),
                    Err(_elapsed) => Err(ClientError::QueueFull {
                        limit: COMMAND_QUEUE_LEN,
                    }),
                }
            }
            Admission::AtOnce => match self.commands.try_send(command) {
                Ok(()) => Ok(answer),
                Err(mpsc::error::TrySendError::Full(_)) => Err(ClientError::QueueFull {
                    limit: COMMAND_QUEUE_LEN,
                }),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(ClientError::Closed),
            },
        }
    }

    /// `Config::request_timeout`: how long a request may wait for room, and then run.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Whether the driver has stopped (a `shutdown`, by this handle or another clone).
    #[cfg(feature = "sdk")]
    pub(crate) fn is_shut_down(&self) -> bool {
        self.commands.is_closed()
    }

    /// The SDK trait's own state, shared by every clone.
    #[cfg(feature = "sdk")]
    pub(crate) fn sdk_state(&self) -> &crate::sdk::SdkState {
        &self.sdk
    }

    /// This client with the SDK's payload encryption (feature `sdk`): through the SDK's
    /// `MessageClient` trait, `send_messages` seals each message's payload and user-header
    /// block with `encryptor` (writing the sealed bytes back into the caller's messages, as
    /// the SDK's `IggyClient` does) and `poll_messages` opens them, failing the poll with
    /// `CannotDecryptData` when a message was not sealed with this key. Data written by the
    /// SDK with an encryptor reads the same through a client with the same key, and the
    /// other way round. The native `send` and `poll` move bytes as given; clones made
    /// before this call do not encrypt.
    ///
    /// ```no_run
    /// # async fn example(config: iggy_route_core::Config) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use iggy_route_tokio::iggy_common::{Aes256GcmEncryptor, EncryptorKind};
    ///
    /// let key = [7u8; 32];
    /// let encryptor = Arc::new(EncryptorKind::Aes256Gcm(Aes256GcmEncryptor::new(&key)?));
    /// let client = iggy_route_tokio::Client::connect(config).await?.with_encryptor(encryptor);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sdk")]
    #[must_use]
    pub fn with_encryptor(mut self, encryptor: Arc<iggy_common::EncryptorKind>) -> Self {
        self.encryptor = Some(encryptor);
        self
    }

    /// The encryptor of [`Client::with_encryptor`], if any.
    #[cfg(feature = "sdk")]
    pub(crate) fn encryptor(&self) -> Option<&iggy_common::EncryptorKind> {
        self.encryptor.as_deref()
    }

    /// Every listed operation's method ends here: stamps the call with the adapter's clock,
    /// submits its request and reads the reply as the operation expects. The SDK trait's
    /// methods run the calls the native API has no method for through it too.
    pub(crate) async fn run<T>(&self, call: Call<T>) -> Result<T, ClientError> {
        self.run_with(
            call,
            Admission::wait_for_room(Instant::now(), self.request_timeout),
        )
        .await
    }

    /// [`Client::run`] without stamping: a send's messages keep the origin timestamps they
    /// carry, 0 included. The SDK's `send_messages` stores what its caller's messages hold
    /// (its message builder stamps them itself).
    #[cfg(feature = "sdk")]
    pub(crate) async fn run_as_given<T>(&self, call: Call<T>) -> Result<T, ClientError> {
        let admission = Admission::wait_for_room(Instant::now(), self.request_timeout);
        let Call { request, reply } = call;
        reply.extract(self.submit(request, admission).await?)
    }

    async fn run_with<T>(&self, mut call: Call<T>, admission: Admission) -> Result<T, ClientError> {
        call.stamp_origin_timestamps(unix_micros());
        let Call { request, reply } = call;
        reply.extract(self.submit(request, admission).await?)
    }
}

/// A consumer carries out its state's requests on its client.
#[doc(hidden)]
impl StartConsumer for Client {
    type Consumer = TopicConsumer;

    fn claims(&self) -> &GroupClaims {
        &self.claims
    }

    fn start_consumer(self, state: Checked<ConsumerState>) -> TopicConsumer {
        TopicConsumer::new(self, state.into_inner())
    }
}

/// The adapter owns the clock: "now" for messages without a producer timestamp, in µs.
pub(crate) fn unix_micros() -> u64 {
    u64::try_from(since_unix_epoch().as_micros()).unwrap_or(u64::MAX)
}

/// The router's seed, from the operating system's entropy: client ids (the server's dedup
/// identity) and message ids derive from it, so two processes must never share one, even
/// two containers that run as pid 1 and read the same clock.
fn entropy_seed() -> Result<u64, ClientError> {
    getrandom::u64().map_err(|error| ClientError::Io(std::io::Error::other(error)))
}

fn since_unix_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "client_tls_tests.rs"]
mod tls_tests;

/// Producers on several threads share one client: keep it `Clone + Send + Sync`.
const _: () = {
    const fn shareable<T: Clone + Send + Sync>() {}
    shareable::<Client>();
};
