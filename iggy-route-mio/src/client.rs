//! The application's handle: blocking calls, `Clone + Send + Sync`, shared by threads.

use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iggy_route_core::client::consumer::{ConsumerState, GroupClaims, StartConsumer};
use iggy_route_core::client::{Admission, Call, Checked, ClientError, ConnectWait, SessionWatch};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{Config, Reply, Request, Router, SendReceipt, Stats};
use mio::{Poll, Waker};

use crate::consumer::{ConsumerBuilder, TopicConsumer};
use crate::driver::{Command, Dialer, Driver, WAKER};
use crate::probe::probe_delay;
use crate::producer::ProducerBuilder;
use crate::resolve::{Lookup, Resolver, system_lookup};
use crate::responder::{Outcome, Responder};
use crate::session_wait::wait_for_session;
use crate::tls::TlsSettings;

/// A blocking Iggy client whose every request goes to the node that can admit it. Clone it
/// to share one client (one I/O thread, one session) between threads. See the crate
/// documentation.
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// What every clone shares. Dropping the last clone stops the I/O thread.
#[derive(Debug)]
struct Shared {
    commands: mpsc::Sender<Command>,
    /// Shared with the I/O thread's name lookups (mio allows one waker per poll).
    waker: Arc<Waker>,
    stats: Arc<Mutex<Stats>>,
    io_thread: Mutex<Option<JoinHandle<()>>>,
    /// How long a call waits for room in the router (`Config::request_timeout`).
    room_wait: Duration,
    /// The consumer groups this client's consumers are members of.
    claims: GroupClaims,
}

impl Drop for Shared {
    fn drop(&mut self) {
        stop_io_thread(self);
    }
}

/// Asks the I/O thread to shut down and waits for it (its sockets are closed on return).
fn stop_io_thread(shared: &Shared) {
    if shared.commands.send(Command::Shutdown).is_ok() {
        let _ = shared.waker.wake();
    }
    let thread = shared
        .io_thread
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(thread) = thread {
        let _ = thread.join();
    }
}

/// Writes a blocking method of [`Client`] for each entry of
/// [`for_each_operation!`](iggy_route_core::for_each_operation).
macro_rules! methods {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $answer:ty = $call:expr;
    )*) => {$(
        $(#[$meta])*
        pub fn $name(&self, $($arg: $ty),*) -> Result<$answer, ClientError> {
            self.run($call)
        }
    )*};
}

impl Client {
    /// Starts the I/O thread and returns once the session has signed in on a node of
    /// `config.seeds`. Fails with `ClientError::ConnectTimedOut` when no node answered
    /// within a few `config.connect_timeout`s, and with `RequestError::SignIn` when the
    /// credentials were refused.
    ///
    /// With `config.tls`, every link runs TLS, and TLS problems fail with
    /// `ClientError::Tls`: a CA file or server name that is no good before anything is
    /// dialled; a certificate that is not accepted (`NameMismatch`,
    /// `CertificateRejected`) or a node that does not speak TLS (`NotTls`) as soon as a
    /// handshake meets it; `HandshakeTimedOut` rather than `ConnectTimedOut` when
    /// handshakes kept timing out until the budget ran out.
    pub fn connect(config: Config) -> Result<Client, ClientError> {
        config.validate()?;
        Self::start(config, system_lookup())
    }

    /// [`Client::connect`] with the name lookup given (tests use slow or scripted ones).
    pub(crate) fn start(config: Config, lookup: Lookup) -> Result<Client, ClientError> {
        let budget = ConnectWait::new(&config).budget();
        let tls = match &config.tls {
            Some(tls) => Some(TlsSettings::new(tls, &config.seeds)?),
            None => None,
        };
        let room_wait = config.request_timeout;
        let poll = Poll::new()?;
        let (session_ready, session_signal) = mpsc::channel();
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let session = SessionWatch::new(&config, move |outcome| {
            // `connect` may have given up waiting; then nobody listens.
            let _ = session_ready.send(outcome);
        });
        let probe_delay = probe_delay(config.connect_timeout);
        let router = Router::new(config, entropy_seed()?, Instant::now());
        let (commands, command_queue) = mpsc::channel();
        let stats = Arc::new(Mutex::new(Stats::default()));
        let dialer = Dialer {
            resolver: Resolver::new(lookup, Arc::clone(&waker)),
            tls,
            probe_delay,
        };
        let loop_waker = Arc::clone(&waker);
        let claims = GroupClaims::new(move || {
            // A waker that fails leaves the membership to the loop's next wake-up.
            let _ = loop_waker.wake();
        });
        let driver = Driver::new(
            poll,
            router,
            dialer,
            command_queue,
            Arc::clone(&stats),
            session,
        )
        .with_claims(claims.clone());
        let io_thread = std::thread::Builder::new()
            .name("iggy-route-io".to_owned())
            .spawn(move || tracing::info_span!("iggy_route").in_scope(|| driver.run()))?;
        let client = Client {
            shared: Arc::new(Shared {
                commands,
                waker,
                stats,
                io_thread: Mutex::new(Some(io_thread)),
                room_wait,
                claims,
            }),
        };
        // The I/O thread answers as soon as the core reports the session signed in, or the
        // credentials refused for good, or a TLS handshake failed in a way that retrying
        // will not mend; nodes that cannot be reached are the core's to retry, within the
        // budget.
        match wait_for_session(&session_signal, budget, || client.shutdown()) {
            Ok(()) => Ok(client),
            Err(error) => {
                client.shutdown();
                Err(error)
            }
        }
    }

    /// [`Client::connect`] with Iggy's connection string,
    /// `iggy://user:password@host:port[,host:port...]`.
    pub fn from_connection_string(value: &str) -> Result<Client, ClientError> {
        Self::connect(Config::from_connection_string(value)?)
    }

    iggy_route_core::for_each_operation!(methods);

    iggy_route_core::builder_methods!(ProducerBuilder, ConsumerBuilder);

    /// Counters since the client connected: sends, refusals, lookups, reconnects, session
    /// moves.
    pub fn stats(&self) -> Stats {
        *self
            .shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails every pending request with `RequestError::Shutdown` (a write already on the
    /// wire, which its node may have admitted, with `RequestError::OutcomeUnknown`), closes
    /// every connection and stops the I/O thread. Every clone sees `ClientError::Closed` afterwards.
    pub fn shutdown(&self) {
        stop_io_thread(&self.shared);
    }

    /// [`Client::send`] without waiting for room: `ClientError::QueueFull` at once when
    /// the router has no room for it, or while other calls wait for room (a try never
    /// overtakes them).
    pub fn try_send(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitioning: Partitioning,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        let mut call = Call::send(stream, topic, partitioning, messages)?;
        call.stamp_origin_timestamps(unix_micros());
        let Call { request, reply } = call;
        reply.extract(self.try_request(request)?)
    }

    /// Any request: submitted to the router, answered when it completes.
    ///
    /// When the router has no room for it (`Config::max_pending_requests`, or
    /// `max_pending_per_lane` for its partition), it waits for room behind the calls
    /// already waiting, for up to `Config::request_timeout`; past that it fails with
    /// `ClientError::QueueFull`. (Once submitted, it has the router's `request_timeout`.)
    /// At most `max_pending_requests` calls wait; beyond that a call gets `QueueFull` at
    /// once.
    pub fn request(&self, request: Request) -> Result<Reply, ClientError> {
        self.request_with(request, self.wait_for_room())
    }

    /// [`Client::request`] without waiting for room: `ClientError::QueueFull` at once when
    /// the router has no room for it, or while other calls wait for room.
    pub fn try_request(&self, request: Request) -> Result<Reply, ClientError> {
        self.request_with(request, Admission::AtOnce)
    }

    /// Submits `request` without waiting for its answer, which goes to `responder` (run
    /// on the I/O thread). Calls waiting for room are served in the order they were made,
    /// so requests submitted one after another from one thread reach the router in that
    /// order.
    pub(crate) fn submit(&self, request: Request, admission: Admission, responder: Responder) {
        let command = Command::Submit {
            request,
            responder,
            admission,
        };
        // Unsent (the I/O thread is gone), the command is dropped here, and with it the
        // responder, which then answers `Closed`.
        if self.shared.commands.send(command).is_ok() {
            // A waker that fails leaves the command unread until the next wake-up; the
            // request's deadline still ends it.
            let _ = self.shared.waker.wake();
        }
    }

    /// The `Admission` for a call that may wait for room from now.
    pub(crate) fn wait_for_room(&self) -> Admission {
        Admission::wait_for_room(Instant::now(), self.shared.room_wait)
    }

    /// Every listed operation's method ends here: stamps the call with the adapter's clock,
    /// submits its request and reads the reply as the operation expects.
    fn run<T>(&self, mut call: Call<T>) -> Result<T, ClientError> {
        call.stamp_origin_timestamps(unix_micros());
        let Call { request, reply } = call;
        reply.extract(self.request(request)?)
    }

    fn request_with(&self, request: Request, admission: Admission) -> Result<Reply, ClientError> {
        // Bounded: the I/O thread answers every request by its deadline (or its wait for
        // room by its own), and a closed client drops the sender.
        self.hand_off(request, admission)
            .recv()
            .map_err(|_| ClientError::Closed)?
    }

    /// Submits `request` and returns where its answer will come, without waiting for it.
    pub(crate) fn hand_off(
        &self,
        request: Request,
        admission: Admission,
    ) -> mpsc::Receiver<Outcome> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.submit(request, admission, Responder::Caller(reply));
        answer
    }
}

/// A consumer carries out its state's requests on its client.
#[doc(hidden)]
impl StartConsumer for Client {
    type Consumer = TopicConsumer;

    fn claims(&self) -> &GroupClaims {
        &self.shared.claims
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

/// Producers on several threads share one client: keep it `Clone + Send + Sync`.
const _: () = {
    const fn shareable<T: Clone + Send + Sync>() {}
    shareable::<Client>();
};
