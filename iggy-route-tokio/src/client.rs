//! The application's handle: cheap to clone, usable from many tasks at once.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iggy_route_core::client::{Call, ClientError, stamp_origin_timestamps};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    Consumer, Identifier, Message, PollMessagesReply, PollingStrategy, StreamDetails, TopicDetails,
};
use iggy_route_core::{Config, PollRequest, Reply, Request, Router, SendReceipt, Stats};
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, info_span};

use crate::driver::{Command, Driver, IO_QUEUE_LEN};

/// Requests waiting for the driver to take them. The router's own queues are the real
/// bound; this only smooths bursts.
const COMMAND_QUEUE_LEN: usize = 1024;

/// `connect` waits this many connect timeouts for the session to sign in.
const CONNECT_ATTEMPTS: u32 = 3;

/// An Iggy client whose every request goes to the node that can admit it. See the crate
/// documentation.
#[derive(Debug, Clone)]
pub struct Client {
    commands: mpsc::Sender<Command>,
    stats: Arc<Mutex<Stats>>,
}

impl Client {
    /// Starts the driver task and returns once the session has signed in on a node of
    /// `config.seeds`. Fails with `ClientError::ConnectTimedOut` when no node answered
    /// within a few `config.connect_timeout`s, and with `RequestError::SignIn` when the
    /// credentials were refused.
    ///
    /// # Panics
    /// Outside a tokio runtime (the driver task is spawned on the current one).
    pub async fn connect(config: Config) -> Result<Client, ClientError> {
        config.validate()?;
        let budget = config.connect_timeout * CONNECT_ATTEMPTS;
        let router = Router::new(config, entropy_seed()?, Instant::now());
        let (commands, command_queue) = mpsc::channel(COMMAND_QUEUE_LEN);
        let (io_events, io_queue) = mpsc::channel(IO_QUEUE_LEN);
        let stats = Arc::new(Mutex::new(Stats::default()));
        let (session_ready, session_signal) = oneshot::channel();
        let driver = Driver::new(router, io_events, Arc::clone(&stats), session_ready);
        let span = info_span!("iggy_route");
        tokio::spawn(driver.run(command_queue, io_queue).instrument(span));
        let client = Client { commands, stats };
        // The driver answers as soon as the core reports the session signed in, or the
        // credentials refused for good; nodes that cannot be reached are the core's to
        // retry, within the budget.
        let outcome = match tokio::time::timeout(budget, session_signal).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_driver_gone)) => Err(ClientError::Closed),
            Err(_elapsed) => Err(ClientError::ConnectTimedOut { after: budget }),
        };
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

    /// Appends `messages` to the partition `partitioning` picks, on that partition's
    /// primary. A message with id 0 gets a fresh id, and one with `origin_timestamp` 0 gets
    /// the current time, as with the SDK.
    pub async fn send(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitioning: Partitioning,
        mut messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        stamp_origin_timestamps(&mut messages, unix_micros());
        self.call(Call::send(stream, topic, partitioning, messages)?)
            .await
    }

    /// Reads up to `count` messages of one partition (or of the partition the server picks,
    /// for `None`) without committing the consumer offset.
    pub async fn poll(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: Option<u32>,
        consumer: Consumer,
        strategy: PollingStrategy,
        count: u32,
    ) -> Result<PollMessagesReply, ClientError> {
        let call = Call::poll(stream, topic, partition_id, consumer, strategy, count)?;
        self.call(call).await
    }

    /// A poll with every field given, including `auto_commit`.
    pub async fn poll_request(
        &self,
        request: PollRequest,
    ) -> Result<PollMessagesReply, ClientError> {
        self.call(Call::poll_request(request)).await
    }

    /// Stores `consumer`'s offset on the partition's primary.
    pub async fn store_offset(
        &self,
        consumer: Consumer,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: u32,
        offset: u64,
    ) -> Result<(), ClientError> {
        let call = Call::store_offset(consumer, stream, topic, partition_id, offset)?;
        self.call(call).await
    }

    /// Creates a stream.
    pub async fn create_stream(&self, name: &str) -> Result<StreamDetails, ClientError> {
        self.call(Call::create_stream(name)?).await
    }

    /// Creates a topic with `partitions_count` partitions.
    pub async fn create_topic(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        name: &str,
        partitions_count: u32,
    ) -> Result<TopicDetails, ClientError> {
        self.call(Call::create_topic(stream, name, partitions_count)?)
            .await
    }

    /// Adds `partitions_count` partitions to a topic.
    pub async fn create_partitions(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitions_count: u32,
    ) -> Result<(), ClientError> {
        self.call(Call::create_partitions(stream, topic, partitions_count)?)
            .await
    }

    /// A stream's details, or `None` when there is no such stream.
    pub async fn get_stream(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Option<StreamDetails>, ClientError> {
        self.call(Call::get_stream(stream)?).await
    }

    /// A topic's details, or `None` when there is no such topic.
    pub async fn get_topic(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Option<TopicDetails>, ClientError> {
        self.call(Call::get_topic(stream, topic)?).await
    }

    /// Counters since the client connected: sends, refusals, lookups, reconnects, session
    /// moves.
    pub fn stats(&self) -> Stats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails every pending request with `RequestError::Shutdown`, closes every connection
    /// and stops the driver. Every clone sees `ClientError::Closed` afterwards.
    pub async fn shutdown(&self) {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Shutdown { done }).await.is_ok() {
            let _ = finished.await;
        }
    }

    /// Any request: submitted to the router, answered when it completes.
    pub async fn request(&self, request: Request) -> Result<Reply, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Submit { request, reply })
            .await
            .map_err(|_| ClientError::Closed)?;
        answer.await.map_err(|_| ClientError::Closed)?
    }

    /// Submits the call's request and reads the reply as the operation expects.
    async fn call<T>(&self, call: Call<T>) -> Result<T, ClientError> {
        let Call { request, reply } = call;
        reply.extract(self.request(request).await?)
    }
}

/// The adapter owns the clock: "now" for messages without a producer timestamp, in µs.
fn unix_micros() -> u64 {
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
