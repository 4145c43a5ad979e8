//! A consumer group joined by name and then polled, read and left by number, on the SDK's
//! `IggyClient` and on iggy-route through the same program (`group_names/program.rs`),
//! against the loopback cluster. The server resolves a group before it looks at a
//! membership or an offset, so both clients must see one group whatever names it; the
//! router keeps a membership under the identifiers its join used, and the SDK layer
//! writes a joined group's requests with those.

#![allow(clippy::unwrap_used)]

#[path = "group_names/program.rs"]
mod program;

use std::time::Duration;

use iggy::prelude::*;
use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;

use program::{EXPECTED, group_names_program};

async fn on_the_model(sdk: bool) -> Vec<String> {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("shop", "orders", 1);
    let client: Box<dyn Client> = if sdk {
        let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
        client.connect().await.unwrap();
        Box::new(client)
    } else {
        let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
        config.request_timeout = Duration::from_secs(5);
        Box::new(iggy_route_tokio::Client::connect(config).await.unwrap())
    };
    let lines = group_names_program(&*client, "shop", "orders").await;
    let _ = client.shutdown().await;
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_named_by_name_or_number_is_one_group_on_the_sdk() {
    assert_eq!(on_the_model(true).await, EXPECTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_named_by_name_or_number_is_one_group_on_iggy_route() {
    assert_eq!(on_the_model(false).await, EXPECTED);
}
