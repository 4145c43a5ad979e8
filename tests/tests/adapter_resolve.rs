//! Seeds given by name, for each adapter's own `Client`: a name that does not resolve,
//! listed before a good seed, only moves the session on to it; a name that resolves to
//! several addresses is served by whichever of them listens; an IPv6 literal connects; and
//! a client with nothing resolvable fails its connect within its budget.
//!
//! The mio adapter resolves names off its I/O thread and tries every address in turn; its
//! own unit tests (`iggy-route-mio/src/tests.rs`) script the resolver to show both with a
//! lookup that hangs and a name with refused addresses first, which the system resolver of
//! a test machine cannot be made to produce.

#![allow(clippy::unwrap_used)]

use std::net::{Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};
use iggy_route_tests::scripted::{ScriptedNode, TOPIC_NAME};

/// `Client::connect` waits 3 connect timeouts (500 ms each in `short_config`).
const CONNECT_BUDGET: Duration = Duration::from_millis(1500);

/// The session works: a topic read and a send both succeed.
fn assert_serves(client: &TestClient, node: &ScriptedNode) {
    let topic = client.get_topic().unwrap().unwrap();
    assert_eq!(topic.summary.name.as_str(), TOPIC_NAME);
    let payload = Bytes::from_static(b"resolved");
    let receipt = client.send(2, payload.clone()).unwrap();
    let stored = node.stored();
    let batch = stored.last().unwrap();
    assert_eq!(batch.payloads, vec![payload]);
    assert_eq!(receipt.base_offset, Some(batch.base_offset));
}

fn connect(adapter: Adapter, seeds: Vec<String>) -> Result<TestClient, ClientError> {
    iggy_route_tests::error_events::install();
    TestClient::connect(adapter, short_config(seeds))
}

fn unresolvable_seed_first(adapter: Adapter) {
    let node = ScriptedNode::start();
    let seeds = vec!["no-such-host.invalid:8090".to_owned(), node.seed()];
    let started = Instant::now();
    let client = connect(adapter, seeds).unwrap();
    assert!(
        started.elapsed() < CONNECT_BUDGET,
        "{:?}",
        started.elapsed()
    );
    assert_serves(&client, &node);
    client.shutdown();
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn tokio_an_unresolvable_seed_before_a_good_one_is_skipped() {
    unresolvable_seed_first(Adapter::Tokio);
}

#[test]
fn mio_an_unresolvable_seed_before_a_good_one_is_skipped() {
    unresolvable_seed_first(Adapter::Mio);
}

/// `localhost:PORT`, with the node listening on the last address `localhost` resolves to
/// only. Where it resolves to `::1` and `127.0.0.1` (many hosts), the client must move
/// past the address that refuses; where it resolves to one address (this project's CI
/// container), this checks name resolution for the session and the data link.
fn seed_by_name(adapter: Adapter) {
    let resolved: Vec<SocketAddr> = ("localhost", 0).to_socket_addrs().unwrap().collect();
    let last = *resolved.last().unwrap();
    let node = ScriptedNode::start_on(SocketAddr::new(last.ip(), 0)).unwrap();
    // The roster and routes name the node as the seed does, so the data link dials the
    // name too.
    node.set_roster_host("localhost");
    let seed = format!("localhost:{}", node.addr().port());
    let client = connect(adapter, vec![seed]).unwrap();
    assert_serves(&client, &node);
    client.shutdown();
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn tokio_a_seed_by_name_connects_to_the_address_that_listens() {
    seed_by_name(Adapter::Tokio);
}

#[test]
fn mio_a_seed_by_name_connects_to_the_address_that_listens() {
    seed_by_name(Adapter::Mio);
}

fn ipv6_literal(adapter: Adapter) {
    let Ok(node) = ScriptedNode::start_on(SocketAddr::from((Ipv6Addr::LOCALHOST, 0))) else {
        // A host without IPv6 loopback has nothing to test here.
        eprintln!("skipped: ::1 cannot be bound on this host");
        return;
    };
    let client = connect(adapter, vec![node.seed()]).unwrap();
    assert_serves(&client, &node);
    client.shutdown();
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn tokio_an_ipv6_literal_seed_connects() {
    ipv6_literal(Adapter::Tokio);
}

#[test]
fn mio_an_ipv6_literal_seed_connects() {
    ipv6_literal(Adapter::Mio);
}

fn nothing_resolves(adapter: Adapter) {
    let started = Instant::now();
    let error = connect(adapter, vec!["no-such-host.invalid:8090".to_owned()]).unwrap_err();
    assert!(
        matches!(error, ClientError::ConnectTimedOut { .. }),
        "{error:?}"
    );
    // The budget, plus a little for the shutdown that follows a failed connect.
    assert!(
        started.elapsed() < CONNECT_BUDGET + Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn tokio_a_client_with_no_resolvable_seed_fails_within_its_budget() {
    nothing_resolves(Adapter::Tokio);
}

#[test]
fn mio_a_client_with_no_resolvable_seed_fails_within_its_budget() {
    nothing_resolves(Adapter::Mio);
}
