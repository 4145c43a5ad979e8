//! Both adapters behind one blocking face, so that each adversarial scenario is written once
//! and run against each adapter's own public `Client`.
//!
//! The tokio client runs on a runtime of its own (two workers) that this wrapper owns; its
//! calls are made with `Runtime::block_on`, from as many threads as a test likes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Message, TopicDetails};
use iggy_route_core::{Config, Credentials, Reply, Request, SendReceipt, Stats};

/// Which adapter a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adapter {
    /// `iggy_route_tokio::Client`.
    Tokio,
    /// `iggy_route_mio::Client`.
    Mio,
}

/// A client of either adapter, with blocking calls.
#[derive(Debug)]
pub struct TestClient {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Tokio {
        runtime: Arc<tokio::runtime::Runtime>,
        client: iggy_route_tokio::Client,
    },
    Mio(iggy_route_mio::Client),
}

/// A configuration with short bounds, so every failure a test provokes shows in well under
/// a second or two: 2 s per attempt, 4 s per request, 500 ms per connect, fast reconnects,
/// and one data link per node (so which link a send takes is predictable).
pub fn short_config(seeds: Vec<String>) -> Config {
    let credentials =
        Credentials::user("iggy", "iggy").unwrap_or_else(|error| panic!("credentials: {error}"));
    let mut config = Config::new(seeds, credentials);
    config.attempt_timeout = Duration::from_secs(2);
    config.request_timeout = Duration::from_secs(4);
    config.connect_timeout = Duration::from_millis(500);
    config.reconnect_backoff_initial = Duration::from_millis(10);
    config.reconnect_backoff_max = Duration::from_millis(100);
    config.data_links_per_node = 1;
    config
}

impl TestClient {
    /// Connects with `config` (the adapter's own `Client::connect`).
    pub fn connect(adapter: Adapter, config: Config) -> Result<TestClient, ClientError> {
        let inner = match adapter {
            Adapter::Tokio => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()?;
                let client = runtime.block_on(iggy_route_tokio::Client::connect(config))?;
                Inner::Tokio {
                    runtime: Arc::new(runtime),
                    client,
                }
            }
            Adapter::Mio => Inner::Mio(iggy_route_mio::Client::connect(config)?),
        };
        Ok(TestClient { inner })
    }

    /// Connects with Iggy's connection string (the adapter's own
    /// `Client::from_connection_string`).
    pub fn from_connection_string(
        adapter: Adapter,
        value: &str,
    ) -> Result<TestClient, ClientError> {
        let inner = match adapter {
            Adapter::Tokio => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()?;
                let client =
                    runtime.block_on(iggy_route_tokio::Client::from_connection_string(value))?;
                Inner::Tokio {
                    runtime: Arc::new(runtime),
                    client,
                }
            }
            Adapter::Mio => Inner::Mio(iggy_route_mio::Client::from_connection_string(value)?),
        };
        Ok(TestClient { inner })
    }

    /// Sends one message with `payload` to partition `partition` of topic 1/1.
    pub fn send(&self, partition: u32, payload: Bytes) -> Result<SendReceipt, ClientError> {
        let messages = vec![Message {
            payload,
            ..Message::default()
        }];
        self.send_messages(partition, messages)
    }

    /// Sends `messages` as one batch to partition `partition` of topic 1/1.
    pub fn send_messages(
        &self,
        partition: u32,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        let partitioning = Partitioning::partition_id(partition);
        match &self.inner {
            Inner::Tokio { runtime, client } => {
                runtime.block_on(client.send(1u32, 1u32, partitioning, messages))
            }
            Inner::Mio(client) => client.send(1u32, 1u32, partitioning, messages),
        }
    }

    /// Reads topic 1/1.
    pub fn get_topic(&self) -> Result<Option<TopicDetails>, ClientError> {
        match &self.inner {
            Inner::Tokio { runtime, client } => runtime.block_on(client.get_topic(1u32, 1u32)),
            Inner::Mio(client) => client.get_topic(1u32, 1u32),
        }
    }

    /// Any request, through the adapter's own `Client::request`.
    pub fn request(&self, request: Request) -> Result<Reply, ClientError> {
        match &self.inner {
            Inner::Tokio { runtime, client } => runtime.block_on(client.request(request)),
            Inner::Mio(client) => client.request(request),
        }
    }

    /// The client's counters.
    pub fn stats(&self) -> Stats {
        match &self.inner {
            Inner::Tokio { client, .. } => client.stats(),
            Inner::Mio(client) => client.stats(),
        }
    }

    /// Shuts the client down (its sockets are closed when this returns).
    pub fn shutdown(&self) {
        match &self.inner {
            Inner::Tokio { runtime, client } => runtime.block_on(client.shutdown()),
            Inner::Mio(client) => client.shutdown(),
        }
    }
}
