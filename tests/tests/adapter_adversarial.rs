//! Each adapter's own `Client` against scripted nodes that keep misbehaving, checked through
//! the public API and the nodes' own record of what arrived when: a partition answered 57
//! for ever, replies to no request and bodies that do not decode, connection strings, a
//! route lookup that names a refusing backup for a second, a node that answers every
//! sign-in with garbage, and the identities stamped on the wire. Every scenario runs once
//! per adapter (`tokio_*`, `mio_*`) with short bounds, so each finishes in a few seconds.

#![allow(clippy::unwrap_used)]

// Scenarios 4 to 6 (two nodes, redials, identities), with this file's helpers. Under a
// directory of its own so that Cargo does not take it for a test target of its own.
#[path = "adapter_adversarial/routes_and_identities.rs"]
mod routes_and_identities;

use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::code;
use iggy_route_core::{
    Config, ConfigError, ConnectionStringError, RequestError, SendReceipt, TlsError,
};
use iggy_route_tests::scripted::checks::{assert_genuine, assert_our_topic};
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};
use iggy_route_tests::scripted::{Arrival, Fault, On, ScriptedNode};

/// The attempt timeout of `short_config`: a failure a test provokes must show before it.
const ATTEMPT: Duration = Duration::from_secs(2);

/// How late the node may see a frame the client wrote in time: the node's reader thread
/// wakes a little after the bytes land, on 2 cores shared with the client under test.
const ARRIVAL_SLACK: Duration = Duration::from_millis(50);

fn connect(adapter: Adapter, config: Config) -> TestClient {
    iggy_route_tests::error_events::install();
    TestClient::connect(adapter, config).unwrap()
}

/// A payload that names its test-wide `tag` in its first 8 bytes.
fn tagged(tag: u64) -> Bytes {
    let mut payload = tag.to_le_bytes().to_vec();
    payload.extend_from_slice(b"-adversarial");
    Bytes::from(payload)
}

fn send_ok(client: &TestClient, node: &ScriptedNode, partition: u32, tag: u64) {
    let payload = tagged(tag);
    let receipt = client.send(partition, payload.clone()).unwrap();
    assert_genuine(node, &receipt, partition, &payload);
}

fn assert_outcome_unknown(result: Result<SendReceipt, ClientError>) {
    match result {
        Err(ClientError::Request(RequestError::OutcomeUnknown { .. })) => {}
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The sends to `partition` the node read after the first `skip` arrivals.
fn sends_to(node: &ScriptedNode, skip: usize, partition: u32) -> Vec<Arrival> {
    node.arrivals()
        .into_iter()
        .skip(skip)
        .filter(|a| a.command == code::SEND_MESSAGES && a.partition == Some(partition))
        .collect()
}

fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

fn finish(client: TestClient, node: ScriptedNode) {
    client.shutdown();
    drop(node);
    iggy_route_tests::error_events::assert_none();
}

fn finish_node(node: ScriptedNode) {
    drop(node);
    iggy_route_tests::error_events::assert_none();
}

/// Sets a field the builder would refuse; `Config`'s fields are public for exactly this.
fn with(mut config: Config, set: impl FnOnce(&mut Config)) -> Config {
    set(&mut config);
    config
}

// 1. 57 for ever -----------------------------------------------------------------------------

/// Partition 1 is answered 57 for ever, with replays allowed to run out long before the
/// request's deadline: exactly `max_replays` replays of the same frame (same link, same
/// request number), spaced by the jittered doubling from `replay_interval` to
/// `replay_interval_max`; then the link is given up and the send is `OutcomeUnknown`. Once
/// the node stops answering 57, the same partition takes the next send: its lane was
/// released.
fn replays_run_out(adapter: Adapter) {
    const MAX_REPLAYS: u32 = 5;
    let (first, max) = (Duration::from_millis(20), Duration::from_millis(80));
    let node = ScriptedNode::start();
    let config = with(short_config(vec![node.seed()]), |c| {
        c.replay_interval = first;
        c.replay_interval_max = max;
        c.max_replays = MAX_REPLAYS;
        c.request_timeout = Duration::from_secs(3);
    });
    let client = connect(adapter, config);
    send_ok(&client, &node, 1, 1);

    node.set_send_status(Some(1), Some(57));
    let mark = node.arrivals().len();
    let closed = node.stats().closed_by_client;
    let started = Instant::now();
    assert_outcome_unknown(client.send(1, tagged(2)));
    // Nominal waits 20+40+80+80+80 ms: the replays ran out, the deadline (3 s) did not.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // Anything still scheduled would show within a few longest waits.
    std::thread::sleep(3 * max);
    let sends = sends_to(&node, mark, 1);
    assert_eq!(sends.len(), 1 + MAX_REPLAYS as usize, "{sends:#?}");
    assert!(
        sends
            .iter()
            .all(|a| (a.connection, a.request) == (sends[0].connection, sends[0].request)),
        "a 57 is replayed as the same frame on the same link only: {sends:#?}"
    );
    let times: Vec<Instant> = sends.iter().map(|a| a.at).collect();
    for (replay, gap) in gaps(&times).into_iter().enumerate() {
        let nominal = (first * (1 << replay)).min(max);
        // Equal jitter: between half the nominal wait and all of it (plus arrival noise).
        assert!(
            gap + Duration::from_millis(3) >= nominal / 2 && gap <= nominal + ARRIVAL_SLACK,
            "replay {replay}: gap {gap:?}, nominal {nominal:?}"
        );
    }
    wait_until("the client counts the replays", ATTEMPT, || {
        client.stats().replays >= u64::from(MAX_REPLAYS)
    });
    assert_eq!(client.stats().replays, u64::from(MAX_REPLAYS));
    assert!(
        node.stats().closed_by_client > closed,
        "the link was given up"
    );

    node.set_send_status(Some(1), None);
    let released = Instant::now();
    send_ok(&client, &node, 1, 3);
    assert!(released.elapsed() < ATTEMPT / 2, "{:?}", released.elapsed());
    finish(client, node);
}

#[test]
fn tokio_57_for_ever_replays_at_most_max_replays_then_releases_the_lane() {
    replays_run_out(Adapter::Tokio);
}

#[test]
fn mio_57_for_ever_replays_at_most_max_replays_then_releases_the_lane() {
    replays_run_out(Adapter::Mio);
}

/// Partition 2 is answered 57 for ever and replays would never run out: the send ends
/// typed by its deadline, the node reads nothing for it after that deadline, the replays
/// in between are bounded by their growing waits, and the lane is free afterwards.
fn replays_end_at_the_deadline(adapter: Adapter) {
    let deadline = Duration::from_millis(400);
    let (first, max) = (Duration::from_millis(10), Duration::from_millis(40));
    let node = ScriptedNode::start();
    let config = with(short_config(vec![node.seed()]), |c| {
        c.replay_interval = first;
        c.replay_interval_max = max;
        c.max_replays = 1000;
        c.request_timeout = deadline;
    });
    let client = connect(adapter, config);
    send_ok(&client, &node, 2, 1);

    node.set_send_status(Some(2), Some(57));
    let mark = node.arrivals().len();
    let started = Instant::now();
    let error = client.send(2, tagged(2)).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(
            error,
            ClientError::Request(
                RequestError::TimedOut { .. } | RequestError::OutcomeUnknown { .. }
            )
        ),
        "{error:?}"
    );
    // By its deadline, and not before it: 1000 replays never run out in 400 ms.
    assert!(
        elapsed + Duration::from_millis(10) >= deadline && elapsed <= deadline + 2 * ARRIVAL_SLACK,
        "{elapsed:?}"
    );
    // Long enough for any replay still scheduled to be written and read.
    std::thread::sleep(4 * max);
    let sends = sends_to(&node, mark, 2);
    let late: Vec<_> = sends
        .iter()
        .filter(|a| a.at > started + deadline + ARRIVAL_SLACK)
        .collect();
    assert!(late.is_empty(), "written after the deadline: {late:#?}");
    // Waits of at least 5, 10, 20, then 20 ms each: at most 3 + 365/20 replays in 400 ms.
    assert!(
        (4..=24).contains(&sends.len()),
        "{} frames for one request",
        sends.len()
    );

    // The follow-up send has the same 400 ms to live: it succeeds only if the lane is free.
    node.set_send_status(Some(2), None);
    send_ok(&client, &node, 2, 3);
    finish(client, node);
}

#[test]
fn tokio_57_for_ever_ends_by_the_deadline_and_nothing_is_written_after_it() {
    replays_end_at_the_deadline(Adapter::Tokio);
}

#[test]
fn mio_57_for_ever_ends_by_the_deadline_and_nothing_is_written_after_it() {
    replays_end_at_the_deadline(Adapter::Mio);
}

// 2. Replies that answer nothing, bodies that do not decode -------------------------------

/// A success reply that echoes another request number (bytes 200..208), and a success
/// reply whose body does not decode: the send is never `Ok` (the node did store it, so
/// `OutcomeUnknown` is the truth), the link is given up and the next send succeeds on a
/// fresh one. For a topic read the same faults cost nothing visible (the read is asked
/// again) or fail it `Malformed` (an unreadable yes to a read).
fn replies_to_nothing(adapter: Adapter) {
    let node = ScriptedNode::start();
    let client = connect(adapter, short_config(vec![node.seed()]));
    send_ok(&client, &node, 0, 1);
    let mut tag = 1;
    for fault in [Fault::WrongRequestNumber, Fault::UndecodableBody] {
        node.inject(On::Send, fault, 1);
        let (connections, closed) = (node.stats().connections, node.stats().closed_by_client);
        tag += 1;
        let lost = tagged(tag);
        let started = Instant::now();
        assert_outcome_unknown(client.send(0, lost.clone()));
        assert!(
            started.elapsed() < ATTEMPT / 2,
            "{fault:?}: {:?}",
            started.elapsed()
        );
        assert!(
            node.stored()
                .iter()
                .any(|b| b.payloads == vec![lost.clone()])
        );
        wait_until("the client drops the link", ATTEMPT, || {
            node.stats().closed_by_client > closed
        });
        tag += 1;
        send_ok(&client, &node, 0, tag);
        assert!(
            node.stats().connections > connections,
            "{fault:?}: a fresh link"
        );
    }
    assert_eq!(node.faults_left(), 0);

    node.inject(On::GetTopic, Fault::WrongRequestNumber, 1);
    assert_our_topic(client.get_topic().unwrap());
    node.inject(On::GetTopic, Fault::UndecodableBody, 1);
    match client.get_topic() {
        Err(ClientError::Request(RequestError::Malformed(_))) => {}
        other => panic!("an unreadable topic must fail Malformed: {other:?}"),
    }
    assert_our_topic(client.get_topic().unwrap());
    wait_until("four violations counted", ATTEMPT, || {
        client.stats().protocol_violations >= 4
    });
    tag += 1;
    send_ok(&client, &node, 0, tag);
    finish(client, node);
}

#[test]
fn tokio_a_reply_to_no_request_or_an_undecodable_yes_is_never_a_success() {
    replies_to_nothing(Adapter::Tokio);
}

#[test]
fn mio_a_reply_to_no_request_or_an_undecodable_yes_is_never_a_success() {
    replies_to_nothing(Adapter::Mio);
}

// 3. Connection strings and configurations refused before any connection ------------------

/// Not a real secret: a password easy to spot in any text that leaks it.
const PASSWORD: &str = "Qv7pZx9Secret";

fn assert_hidden(what: &str, shown: &str) {
    assert!(
        !shown.contains(PASSWORD),
        "{what} shows the password: {shown}"
    );
}

/// `tls=true` and an unknown option are refused by the adapter's own constructor, typed,
/// and no connection reaches the node; neither error shows the password.
fn refused_connection_strings(adapter: Adapter) {
    iggy_route_tests::error_events::install();
    let node = ScriptedNode::start();
    let seed = node.seed();
    let refused = |query: &str| {
        let value = format!("iggy://u:{PASSWORD}@{seed}?{query}");
        let error = TestClient::from_connection_string(adapter, &value).unwrap_err();
        assert_hidden(query, &error.to_string());
        assert_hidden(query, &format!("{error:?}"));
        error
    };
    // TLS settings that would be ignored (no tls=true: the SDK connects in plaintext).
    let error = refused("tls_ca_file=/etc/iggy/ca.pem");
    assert!(
        matches!(
            error,
            ClientError::ConnectionString(ConnectionStringError::Unsupported {
                option: "tls_ca_file",
                ..
            })
        ),
        "{error:?}"
    );
    // TLS with a CA file that does not exist: refused before anything is dialled.
    let error = refused("tls=true&tls_ca_file=/nonexistent/iggy-route-ca.pem");
    assert!(
        matches!(error, ClientError::Tls(TlsError::CaFile { .. })),
        "{error:?}"
    );
    let error = refused("bogus_option=1");
    assert!(
        matches!(
            &error,
            ClientError::ConnectionString(ConnectionStringError::UnknownOption { option })
                if option == "bogus_option"
        ),
        "{error:?}"
    );
    // A refused client starts nothing, so nothing can dial later either.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(node.stats().connections, 0);
    drop(node);
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn tokio_tls_and_unknown_options_are_refused_before_connecting() {
    refused_connection_strings(Adapter::Tokio);
}

#[test]
fn mio_tls_and_unknown_options_are_refused_before_connecting() {
    refused_connection_strings(Adapter::Mio);
}

/// `heartbeat_interval=100ms` is honoured: an idle session link PINGs about every 100 ms
/// (the default would be every 5 s). The client's Debug output does not show the password.
fn heartbeat_from_connection_string(adapter: Adapter) {
    let interval = Duration::from_millis(100);
    let node = ScriptedNode::start();
    let value = format!(
        "iggy://iggy:{PASSWORD}@{}?heartbeat_interval=100ms",
        node.seed()
    );
    iggy_route_tests::error_events::install();
    let client = TestClient::from_connection_string(adapter, &value).unwrap();
    assert_hidden("the client", &format!("{client:?}"));
    let from = Instant::now();
    std::thread::sleep(11 * interval);
    let pings: Vec<Arrival> = node
        .arrivals()
        .into_iter()
        .filter(|a| a.command == code::PING && a.at >= from)
        .collect();
    // Nothing was sent but PINGs, so only the session link exists.
    assert!(pings.iter().all(|a| a.connection == 0), "{pings:#?}");
    assert!(
        (6..=12).contains(&pings.len()),
        "{} PINGs in {:?}",
        pings.len(),
        11 * interval
    );
    let times: Vec<Instant> = pings.iter().map(|a| a.at).collect();
    for gap in gaps(&times) {
        // Never early (less arrival noise), and late only by a loaded machine's timers.
        assert!(
            gap + Duration::from_millis(20) >= interval && gap <= 3 * interval,
            "{gap:?}"
        );
    }
    finish(client, node);
}

#[test]
fn tokio_heartbeat_interval_from_the_connection_string_is_honoured() {
    heartbeat_from_connection_string(Adapter::Tokio);
}

#[test]
fn mio_heartbeat_interval_from_the_connection_string_is_honoured() {
    heartbeat_from_connection_string(Adapter::Mio);
}

/// `max_pending_per_lane = 0` is refused by `connect`, typed, before any connection.
fn zero_lane_bound(adapter: Adapter) {
    let node = ScriptedNode::start();
    let config = with(short_config(vec![node.seed()]), |c| {
        c.max_pending_per_lane = 0
    });
    let error = TestClient::connect(adapter, config).unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Config(ConfigError::Zero {
                field: "max_pending_per_lane"
            })
        ),
        "{error:?}"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(node.stats().connections, 0);
}

#[test]
fn tokio_a_zero_lane_bound_is_refused_before_connecting() {
    zero_lane_bound(Adapter::Tokio);
}

#[test]
fn mio_a_zero_lane_bound_is_refused_before_connecting() {
    zero_lane_bound(Adapter::Mio);
}

// 7. A request the node answers by ending the session ---------------------------------------

/// The node evicts every request of one command (as the real server answers a body or a
/// legacy login code it will not process): the call fails at once with the eviction's
/// reason and the SDK's code, is written exactly once, costs at most one sign-in, and the
/// client's sends go on in milliseconds. A login code given as a raw command is refused
/// before anything is written, as the SDK refuses it.
fn evicted_request(adapter: Adapter) {
    use iggy_route_core::wire::{ErrorCode, EvictionReason};
    use iggy_route_core::{CommandRequest, Plane, Request, SubmitError};
    use iggy_route_tests::scripted::EVICTING_CODE;
    let node = ScriptedNode::start();
    let client = connect(adapter, short_config(vec![node.seed()]));
    send_ok(&client, &node, 0, 1);
    let raw = |code| {
        Request::Command(CommandRequest {
            code,
            body: Bytes::new(),
            plane: Plane::Session,
        })
    };
    let connections = node.stats().connections;
    let started = Instant::now();
    match client.request(raw(EVICTING_CODE)) {
        Err(ClientError::Request(RequestError::Evicted { reason, code })) => {
            assert_eq!(reason, EvictionReason::InvalidRequestBody);
            assert_eq!(code, ErrorCode::InvalidCommand);
        }
        other => panic!("expected the eviction, got {other:?}"),
    }
    assert!(started.elapsed() < ATTEMPT / 4, "{:?}", started.elapsed());
    let resumed = Instant::now();
    send_ok(&client, &node, 0, 2);
    assert!(resumed.elapsed() < ATTEMPT / 4, "{:?}", resumed.elapsed());
    // Long enough for a replay or a storm of sign-ins to show.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.stats().requests(EVICTING_CODE), 1);
    assert!(
        node.stats().connections <= connections + 1,
        "{} connections after the eviction, {connections} before",
        node.stats().connections
    );
    let logins = node.stats().requests(code::LOGIN_REGISTER);
    for login in [
        code::LOGIN_USER,
        code::LOGIN_REGISTER,
        code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
        code::LOGIN_REGISTER_WITH_PAT,
    ] {
        match client.request(raw(login)) {
            Err(ClientError::Submit(SubmitError::SessionCommand { code })) => {
                assert_eq!(code, login);
            }
            other => panic!("code {login}: expected a refusal, got {other:?}"),
        }
        if login != code::LOGIN_REGISTER {
            assert_eq!(node.stats().requests(login), 0, "code {login} was written");
        }
    }
    assert_eq!(node.stats().requests(code::LOGIN_REGISTER), logins);
    send_ok(&client, &node, 0, 3);
    finish(client, node);
}

#[test]
fn tokio_a_request_the_node_evicts_for_fails_at_once_and_the_session_goes_on() {
    evicted_request(Adapter::Tokio);
}

#[test]
fn mio_a_request_the_node_evicts_for_fails_at_once_and_the_session_goes_on() {
    evicted_request(Adapter::Mio);
}

/// A tokio caller that drops its call while the request waits behind another send of its
/// partition (answered 57 until its deadline): the request is withdrawn and never written,
/// and the next send of the partition goes through.
#[test]
fn tokio_a_dropped_call_whose_request_waits_is_never_written() {
    use iggy_route_core::wire::Message;
    use iggy_route_tokio::Partitioning;
    iggy_route_tests::error_events::install();
    let node = ScriptedNode::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let batch = |id: u128| {
        vec![Message {
            id,
            payload: tagged(id as u64),
            ..Message::default()
        }]
    };
    runtime.block_on(async {
        let client = iggy_route_tokio::Client::connect(short_config(vec![node.seed()]))
            .await
            .unwrap();
        let to_zero = || Partitioning::partition_id(0);
        client.send(1u32, 1u32, to_zero(), batch(1)).await.unwrap();
        node.set_send_status(Some(0), Some(57));
        let stuck = tokio::spawn({
            let client = client.clone();
            async move { client.send(1u32, 1u32, to_zero(), batch(2)).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Waits behind the stuck send in the partition's lane; dropped after 100 ms.
        let waiting = client.send(1u32, 1u32, to_zero(), batch(3));
        assert!(
            tokio::time::timeout(Duration::from_millis(100), waiting)
                .await
                .is_err()
        );
        assert!(stuck.await.unwrap().is_err(), "57 until its deadline");
        node.set_send_status(Some(0), None);
        client.send(1u32, 1u32, to_zero(), batch(4)).await.unwrap();
        client.shutdown().await;
    });
    let written: Vec<u128> = node
        .arrivals()
        .iter()
        .flat_map(|arrival| arrival.message_ids.clone())
        .collect();
    assert!(written.contains(&2) && written.contains(&4), "{written:?}");
    assert!(
        !written.contains(&3),
        "the dropped call was written: {written:?}"
    );
    finish_node(node);
}
