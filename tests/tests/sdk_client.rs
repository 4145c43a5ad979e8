//! `iggy_route_tokio::Client` held as a program written against the SDK 0.11.0 holds its
//! client, `Arc<dyn iggy_common::Client>` (feature `sdk`): every method of the trait and its
//! supertraits, against the loopback cluster, each checked by what it did (a stream created
//! is then found, messages sent come back byte for byte at their offsets, a missing stream is
//! the code the SDK gets for it from the same cluster).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::wire::Password;
use iggy_route_core::{Config, Credentials};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::iggy_common::DiagnosticEvent;

/// How long a read waits for a backup's copy to catch up with a write (the loopback
/// cluster's copies lag by up to 250 ms).
const CATCH_UP: Duration = Duration::from_secs(5);

fn config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config
}

/// What a program written against the SDK holds: only the line that builds it differs.
async fn sdk_client(config: Config) -> Arc<dyn Client> {
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

fn code<T: std::fmt::Debug>(result: Result<T, IggyError>) -> u32 {
    match result {
        Err(error) => error.as_code(),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

fn message(id: u128, payload: &str, header: Option<(&str, &str)>) -> IggyMessage {
    let headers = header.map(|(key, value)| {
        BTreeMap::from([(
            HeaderKey::from_str(key).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        )])
    });
    IggyMessage::builder()
        .id(id)
        .payload(Bytes::from(payload.to_owned()))
        .maybe_user_headers(headers)
        .build()
        .unwrap()
}

/// Polls `partition` from `from` until it holds `count` messages there.
async fn poll_until(
    client: &dyn Client,
    (stream, topic): (&Identifier, &Identifier),
    partition: u32,
    from: u64,
    count: usize,
) -> PolledMessages {
    let consumer = Consumer::new(numeric(70));
    let give_up = tokio::time::Instant::now() + CATCH_UP;
    loop {
        let polled = client
            .poll_messages(
                stream,
                topic,
                Some(partition),
                &consumer,
                &PollingStrategy::offset(from),
                10,
                false,
            )
            .await
            .unwrap();
        if polled.messages.len() >= count {
            return polled;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "partition {partition}: {} of {count} messages",
            polled.messages.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The stored offset of `consumer` on `partition`, once a read shows `expected`.
async fn stored_offset_becomes(
    client: &dyn Client,
    consumer: &Consumer,
    (stream, topic): (&Identifier, &Identifier),
    partition: u32,
    expected: Option<u64>,
) {
    let give_up = tokio::time::Instant::now() + CATCH_UP;
    loop {
        let offset = client
            .get_consumer_offset(consumer, stream, topic, Some(partition))
            .await
            .unwrap()
            .map(|info| info.stored_offset);
        if offset == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "stored offset {offset:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[path = "sdk_client/admin.rs"]
mod admin;
#[path = "sdk_client/messages.rs"]
mod messages;
#[path = "sdk_client/session.rs"]
mod session;
