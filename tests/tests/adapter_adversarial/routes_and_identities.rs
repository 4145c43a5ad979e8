//! Scenarios 4 to 6 of `adapter_adversarial`: a route lookup that names a refusing backup
//! for a second, a node that answers every sign-in with garbage, and the identities two
//! clients stamp on the wire.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::{Message, code};
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};
use iggy_route_tests::scripted::{Fault, Login, On, ScriptedNode};

use super::{
    ATTEMPT, assert_genuine, assert_outcome_unknown, connect, finish_node, gaps, send_ok, tagged,
    wait_until, with,
};

// 4. A lookup that names a refusing backup for a second ------------------------------------

/// Two nodes: `a` carries the session and answers route lookups, and its roster names
/// `b` too. For about a second every lookup names `b`, which refuses every send with 58;
/// then the lookups name `a`, the true primary. The send that has been backing off all
/// along succeeds within 100 ms of that change (the route is looked up again every
/// `route_recheck_interval`, 5 ms, while the writes back off), on `a`, and `b` stored
/// nothing.
fn backup_then_true_primary(adapter: Adapter) {
    let (a, b) = (ScriptedNode::start(), ScriptedNode::start());
    a.set_roster_peers(vec![b.addr()]);
    a.set_route_primary(Some(b.addr()));
    b.set_send_status(None, Some(58));
    let client = connect(adapter, short_config(vec![a.seed()]));
    let payload = tagged(1);
    let (result, done, changed) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let result = client.send(0, payload.clone());
            (result, Instant::now())
        });
        wait_until("b refuses the send", ATTEMPT, || {
            b.stats().refused_sends >= 2
        });
        std::thread::sleep(Duration::from_secs(1));
        let changed = Instant::now();
        a.set_route_primary(None);
        let (result, done) = sender.join().unwrap();
        (result, done, changed)
    });
    let receipt = result.unwrap();
    assert_genuine(&a, &receipt, 0, &payload);
    let late = done.saturating_duration_since(changed);
    assert!(
        late <= Duration::from_millis(100),
        "done {late:?} after the change"
    );
    assert!(b.stored().is_empty());
    // The rechecks are paced, not a busy loop: about one per 5 ms over about 1.1 s.
    let lookups = a.stats().requests(code::GET_POLL_ROUTING);
    assert!(lookups <= 600, "{lookups} lookups");
    let refused = b.stats().refused_sends;
    send_ok(&client, &a, 0, 2);
    assert_eq!(b.stats().refused_sends, refused, "the route stays on a");
    wait_until("the client counts the refusals", ATTEMPT, || {
        client.stats().refusals >= 2
    });
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown();
    drop(b);
    finish_node(a);
}

#[test]
fn tokio_a_new_primary_is_written_to_within_100_ms_of_being_named() {
    backup_then_true_primary(Adapter::Tokio);
}

#[test]
fn mio_a_new_primary_is_written_to_within_100_ms_of_being_named() {
    backup_then_true_primary(Adapter::Mio);
}

// 5. Garbage for every sign-in ---------------------------------------------------------------

/// A node that accepts TCP and answers every sign-in with 300 bytes that begin no frame:
/// over the 3 s connect budget the client dials it a bounded number of times, each wait
/// at least half its nominal step of a doubling backoff from 20 ms (so the 5th gap is more
/// than 4 times the 1st), connect fails typed, and no dial follows.
fn garbage_sign_in(adapter: Adapter) {
    let (initial, max) = (Duration::from_millis(20), Duration::from_secs(1));
    let node = ScriptedNode::start();
    node.set_login(Login::Garbage);
    let config = with(short_config(vec![node.seed()]), |c| {
        c.reconnect_backoff_initial = initial;
        c.reconnect_backoff_max = max;
        c.connect_timeout = Duration::from_secs(1);
    });
    iggy_route_tests::error_events::install();
    let started = Instant::now();
    let error = TestClient::connect(adapter, config).unwrap_err();
    assert!(
        matches!(error, ClientError::ConnectTimedOut { .. }),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // A dial made just before the give-up may be accepted by the node's thread a little
    // later on a loaded machine (seen in the full suite on 2 cores): let those land, then
    // no dial may follow.
    std::thread::sleep(Duration::from_millis(150));
    let accepted = node.accepted();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        node.accepted().len(),
        accepted.len(),
        "a dial after connect gave up"
    );
    // Nominal steps 20, 40, ..., 640, then 1000 ms: 8 to 12 dials fit in 3 s.
    assert!(
        (7..=14).contains(&accepted.len()),
        "{} dials: {:?}",
        accepted.len(),
        gaps(&accepted)
    );
    let gaps = gaps(&accepted);
    for (step, gap) in gaps.iter().enumerate().take(6) {
        let nominal = (initial * (1 << step)).min(max);
        assert!(
            *gap + Duration::from_millis(5) >= nominal / 2,
            "gap {step}: {gap:?}, nominal {nominal:?}; all {gaps:?}"
        );
    }
    assert!(gaps[4] > 4 * gaps[0], "{gaps:?}");
    // Every dial signed in (and got garbage), and the client hung up on each.
    assert!(node.stats().requests(code::LOGIN_REGISTER) + 1 >= accepted.len());
    wait_until("every garbage link closed", ATTEMPT, || {
        node.stats().closed_by_client == accepted.len()
    });
    finish_node(node);
}

#[test]
fn tokio_a_node_answering_sign_ins_with_garbage_is_redialled_with_growing_waits() {
    garbage_sign_in(Adapter::Tokio);
}

#[test]
fn mio_a_node_answering_sign_ins_with_garbage_is_redialled_with_growing_waits() {
    garbage_sign_in(Adapter::Mio);
}

// 6. Identities on the wire ---------------------------------------------------------------

/// Two clients created at the same instant in one process, each sending messages with id
/// 0 and losing one data link on the way: every link (session links, data links and the
/// link that replaced the lost one) carries a client id of its own, constant on the link
/// and never 0, and every message id stamped by either client is distinct and non-zero.
fn identities(adapter: Adapter) {
    let node = ScriptedNode::start();
    iggy_route_tests::error_events::install();
    let start = Barrier::new(2);
    let clients: Vec<TestClient> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    TestClient::connect(adapter, short_config(vec![node.seed()])).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let batch = || -> Vec<Message> {
        (0..50u8)
            .map(|i| Message {
                payload: Bytes::from(vec![i; 8]),
                ..Message::default()
            })
            .collect()
    };
    for (index, client) in clients.iter().enumerate() {
        client.send_messages(0, batch()).unwrap();
        if index == 0 {
            // The data link goes; its replacement must be a new identity too.
            node.inject(On::Send, Fault::CloseMidFrame, 1);
            assert_outcome_unknown(client.send_messages(0, batch()));
        }
        client.send_messages(1, batch()).unwrap();
    }
    for client in &clients {
        client.shutdown();
    }

    let arrivals = node.arrivals();
    let mut per_link: BTreeMap<usize, BTreeSet<u128>> = BTreeMap::new();
    for arrival in &arrivals {
        per_link
            .entry(arrival.connection)
            .or_default()
            .insert(arrival.client);
    }
    // Two session links, two first data links and the replacement.
    assert!(per_link.len() >= 5, "{per_link:?}");
    let mut ids = BTreeSet::new();
    for (link, seen) in &per_link {
        assert_eq!(seen.len(), 1, "link {link} changed its client id: {seen:?}");
        let id = *seen.first().unwrap();
        assert_ne!(id, 0, "link {link}");
        assert!(ids.insert(id), "link {link} reuses client id {id:#x}");
    }
    let message_ids: Vec<u128> = arrivals
        .iter()
        .filter(|a| a.command == code::SEND_MESSAGES)
        .flat_map(|a| a.message_ids.iter().copied())
        .collect();
    assert_eq!(message_ids.len(), 5 * 50);
    assert!(message_ids.iter().all(|&id| id != 0));
    let distinct: BTreeSet<u128> = message_ids.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        message_ids.len(),
        "a message id was stamped twice"
    );
    finish_node(node);
}

#[test]
fn tokio_two_clients_never_share_a_client_id_or_a_message_id() {
    identities(Adapter::Tokio);
}

#[test]
fn mio_two_clients_never_share_a_client_id_or_a_message_id() {
    identities(Adapter::Mio);
}
