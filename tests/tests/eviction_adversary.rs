//! Adversarial tests of evictions through the tokio adapter's public `Client` (and, where
//! cheap, the mio one): many evicting requests at once from many tasks, callers that drop
//! their futures while the requests wait for a session, shutdown in a storm of evictions,
//! deadlines shorter than the sign-in budget's wait, and every plane of the loopback
//! cluster.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{ErrorCode, EvictionReason, Identifier, Message, code};
use iggy_route_core::{CommandRequest, Config, Plane, Request, RequestError, SubmitError};
use iggy_route_tests::cluster::{RETIRED_CODE, TestCluster};
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};
use iggy_route_tests::scripted::{EVICTING_CODE, Login, ScriptedNode};
use iggy_route_tokio::Client;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A raw command `code` on `plane`, tagged `tag` in its body.
fn raw(code: u32, tag: u64, plane: Plane) -> Request {
    Request::Command(CommandRequest {
        code,
        body: Bytes::copy_from_slice(&tag.to_le_bytes()),
        plane,
    })
}

fn message(payload: &str) -> Vec<Message> {
    vec![Message {
        payload: Bytes::from(payload.to_owned()),
        ..Message::default()
    }]
}

fn partition_plane(stream: u32, topic: u32, partition: u32, write: bool) -> Plane {
    Plane::Partition {
        stream: Identifier::Numeric(stream),
        topic: Identifier::Numeric(topic),
        partition,
        write,
    }
}

fn is_scripted_eviction(result: &Result<iggy_route_core::Reply, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Request(RequestError::Evicted {
            reason: EvictionReason::InvalidRequestBody,
            code: ErrorCode::InvalidCommand,
        }))
    )
}

fn is_timed_out(result: &Result<iggy_route_core::Reply, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Request(RequestError::TimedOut { .. }))
    )
}

/// Each connection: when it was accepted (from the first), and the commands it carried.
fn describe_connections(node: &ScriptedNode) -> String {
    let accepted = node.accepted();
    let Some(first) = accepted.first().copied() else {
        return String::new();
    };
    let arrivals = node.arrivals();
    accepted
        .iter()
        .enumerate()
        .map(|(index, at)| {
            let commands: Vec<String> = arrivals
                .iter()
                .filter(|a| a.connection == index)
                .map(|a| format!("{}@{}ms", a.command, (a.at - first).as_millis()))
                .collect();
            format!(
                "\n  #{index} at {} ms: {}",
                (*at - first).as_millis(),
                commands.join(" ")
            )
        })
        .collect()
}

// 1. A storm of evictions from many tasks ------------------------------------------------------

/// Links the node may accept within one second: 2 x (data links per node + 1), with one
/// data link per node (`short_config`).
const BUDGET: usize = 4;

/// The window in which the node counts accepts: a second, less a little for the latency of
/// a dial (the router counts from when it asks for a link, the node from its accept).
const WINDOW: Duration = Duration::from_millis(975);

/// The most instants of `at` within any one `WINDOW`.
fn most_in_a_window(at: &[Instant]) -> usize {
    at.iter()
        .map(|from| {
            at.iter()
                .filter(|t| **t >= *from && **t < *from + WINDOW)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Twenty tasks each make a request the node evicts for (on `planes`, in turn), while eight
/// others send. Each evicting call ends evicted (or, held back by the sign-in budget, timed
/// out) within its deadline and is written at most once (the node's count is the evicted
/// calls, plus at most the timed-out ones); no send is stored twice; the node accepts at
/// most the budget of connections in any second. Returns the sends' results.
fn storm(planes: &[Plane]) -> Vec<(Duration, Result<iggy_route_core::SendReceipt, ClientError>)> {
    let node = ScriptedNode::start();
    let rt = runtime();
    let config = short_config(vec![node.seed()]);
    let timeout = config.request_timeout;
    let client = rt.block_on(Client::connect(config)).unwrap();
    rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(0), message("warm")))
        .unwrap();
    let (evicting, sends) = rt.block_on(async {
        let mut evicting = Vec::new();
        for tag in 0..20u64 {
            let client = client.clone();
            let plane = planes[tag as usize % planes.len()].clone();
            evicting.push(tokio::spawn(async move {
                let started = Instant::now();
                let result = client.request(raw(EVICTING_CODE, tag, plane)).await;
                (started.elapsed(), result)
            }));
        }
        let mut sends = Vec::new();
        for i in 0..8u32 {
            let client = client.clone();
            sends.push(tokio::spawn(async move {
                let started = Instant::now();
                let result = client
                    .send(
                        1u32,
                        1u32,
                        Partitioning::partition_id(i % 3),
                        message(&format!("s{i}")),
                    )
                    .await;
                (started.elapsed(), result)
            }));
        }
        let mut e = Vec::new();
        for h in evicting {
            e.push(h.await.unwrap());
        }
        let mut s = Vec::new();
        for h in sends {
            s.push(h.await.unwrap());
        }
        (e, s)
    });
    let slack = Duration::from_millis(1_500);
    let mut evicted = 0;
    let mut timed_out = 0;
    for (tag, (took, result)) in evicting.iter().enumerate() {
        assert!(*took <= timeout + slack, "tag {tag} took {took:?}");
        if is_scripted_eviction(result) {
            evicted += 1;
        } else if is_timed_out(result) {
            timed_out += 1;
        } else {
            panic!("tag {tag}: {result:?}");
        }
    }
    // Long enough for a late replay to show.
    std::thread::sleep(Duration::from_millis(500));
    let written = node.stats().requests(EVICTING_CODE);
    assert!(
        written >= evicted && written <= evicted + timed_out,
        "{written} evicting frames written for {evicted} evicted and {timed_out} timed-out calls"
    );
    let most = most_in_a_window(&node.accepted());
    assert!(
        most <= BUDGET,
        "{most} connections accepted within {WINDOW:?}: {}",
        describe_connections(&node)
    );
    for (i, (took, result)) in sends.iter().enumerate() {
        assert!(*took <= timeout + slack, "send {i} took {took:?}");
        let payload = Bytes::from(format!("s{i}"));
        let copies = node
            .stored()
            .iter()
            .filter(|b| b.payloads.contains(&payload))
            .count();
        match result {
            Ok(_) => assert_eq!(copies, 1, "send {i} stored {copies} times"),
            Err(ClientError::Request(RequestError::TimedOut { .. })) => {
                assert!(copies <= 1, "send {i} stored {copies} times");
            }
            Err(other) => panic!("send {i}: {other:?}"),
        }
    }
    rt.block_on(client.shutdown());
    sends
}

/// Evictions on the session only: they end the coordinator's sessions, never the data
/// link's, so every send goes on, each in well under its deadline.
#[test]
fn tokio_session_evictions_from_many_tasks_stay_within_budget_and_sends_go_on_at_once() {
    let sends = storm(&[Plane::Session]);
    for (i, (took, result)) in sends.iter().enumerate() {
        assert!(result.is_ok(), "send {i} after {took:?}: {result:?}");
        assert!(
            *took < Duration::from_secs(1),
            "send {i} waited {took:?} for evictions on another link"
        );
    }
}

/// Evictions on the session and on the node's data link (the metadata leader's plane),
/// which the sends share: every call still ends once, within its deadline, nothing is
/// written twice and the node is not stormed.
#[test]
fn tokio_evictions_on_the_session_and_the_data_link_from_many_tasks_stay_within_budget() {
    let sends = storm(&[Plane::Session, Plane::MetadataWrite]);
    let failed = sends.iter().filter(|(_, r)| r.is_err()).count();
    eprintln!(
        "{failed} of {} sends timed out behind the evictions",
        sends.len()
    );
}

/// The same storm through the mio adapter, from threads.
#[test]
fn mio_evictions_from_many_threads_each_end_once_within_budget_and_sends_go_on() {
    let node = ScriptedNode::start();
    let config = short_config(vec![node.seed()]);
    let timeout = config.request_timeout;
    let client = Arc::new(TestClient::connect(Adapter::Mio, config).unwrap());
    client.send(0, Bytes::from_static(b"warm")).unwrap();
    let mut threads = Vec::new();
    for tag in 0..12u64 {
        let client = Arc::clone(&client);
        threads.push(std::thread::spawn(move || {
            let plane = if tag % 2 == 0 {
                Plane::Session
            } else {
                Plane::MetadataWrite
            };
            let started = Instant::now();
            let result = client.request(raw(EVICTING_CODE, tag, plane));
            (started.elapsed(), result)
        }));
    }
    let mut senders = Vec::new();
    for i in 0..4u32 {
        let client = Arc::clone(&client);
        senders.push(std::thread::spawn(move || {
            client.send(i % 3, Bytes::from(format!("s{i}")))
        }));
    }
    let mut evicted = 0;
    let mut timed_out = 0;
    for (tag, thread) in threads.into_iter().enumerate() {
        let (took, result) = thread.join().unwrap();
        assert!(
            took <= timeout + Duration::from_millis(1_500),
            "tag {tag} took {took:?}"
        );
        if is_scripted_eviction(&result) {
            evicted += 1;
        } else if is_timed_out(&result) {
            timed_out += 1;
        } else {
            panic!("tag {tag}: {result:?}");
        }
    }
    for sender in senders {
        let result = sender.join().unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let written = node.stats().requests(EVICTING_CODE);
    assert!(
        written >= evicted && written <= evicted + timed_out,
        "{written} evicting frames written for {evicted} evicted and {timed_out} timed-out calls"
    );
    let most = most_in_a_window(&node.accepted());
    assert!(
        most <= BUDGET,
        "{most} connections accepted within {WINDOW:?}"
    );
    client.shutdown();
}

// 2. Callers that drop their futures -----------------------------------------------------------

/// Sixteen evicting requests queue on the session, far more than the sign-in budget lets
/// through in the first half second; then every caller drops its future. Whatever was not
/// written by then is withdrawn: the node sees at most one or two more of them (one on the
/// wire at that moment), never the rest.
#[test]
fn tokio_callers_that_drop_their_futures_while_waiting_for_a_session_are_never_written() {
    let node = ScriptedNode::start();
    let rt = runtime();
    let mut config = short_config(vec![node.seed()]);
    config.request_timeout = Duration::from_secs(10);
    let client = rt.block_on(Client::connect(config)).unwrap();
    rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(0), message("warm")))
        .unwrap();
    let handles: Vec<_> = (0..16u64)
        .map(|tag| {
            let client = client.clone();
            rt.spawn(async move {
                client
                    .request(raw(EVICTING_CODE, tag, Plane::Session))
                    .await
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    for handle in &handles {
        handle.abort();
    }
    let at_drop = node.stats().requests(EVICTING_CODE);
    assert!(
        at_drop < 16,
        "all sixteen were written within 600 ms: the sign-in budget held nothing back"
    );
    std::thread::sleep(Duration::from_secs(4));
    let later = node.stats().requests(EVICTING_CODE);
    assert!(
        later <= at_drop + 2,
        "{later} written in all, {at_drop} when every caller had dropped its future"
    );
    // The session still serves.
    let sent =
        rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(1), message("after")));
    assert!(sent.is_ok(), "{sent:?}");
    rt.block_on(client.shutdown());
}

/// Sends wait for a data link whose session was ended (an eviction on it) and whose
/// sign-ins the node answers with garbage; their callers give up (a `timeout` drops the
/// future). Once the node signs links in again, none of those sends is stored, and a new
/// send is.
#[test]
fn tokio_dropped_sends_waiting_for_their_data_link_are_never_stored() {
    let node = ScriptedNode::start();
    let rt = runtime();
    let mut config = short_config(vec![node.seed()]);
    config.request_timeout = Duration::from_secs(10);
    let client = rt.block_on(Client::connect(config)).unwrap();
    rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(0), message("warm")))
        .unwrap();
    node.set_login(Login::Garbage);
    // Ends the data link's session (the metadata leader's link is the node's data link).
    let evicted = rt.block_on(client.request(raw(EVICTING_CODE, 1, Plane::MetadataWrite)));
    assert!(is_scripted_eviction(&evicted), "{evicted:?}");
    let dropped: Vec<String> = (0..10).map(|i| format!("dropped-{i}")).collect();
    rt.block_on(async {
        let mut handles = Vec::new();
        for (i, payload) in dropped.iter().enumerate() {
            let client = client.clone();
            let payload = payload.clone();
            handles.push(tokio::spawn(async move {
                tokio::time::timeout(
                    Duration::from_millis(400),
                    client.send(
                        1u32,
                        1u32,
                        Partitioning::partition_id(u32::try_from(i % 3).unwrap()),
                        message(&payload),
                    ),
                )
                .await
            }));
        }
        for handle in handles {
            let result = handle.await.unwrap();
            assert!(
                result.is_err(),
                "a send went through a garbage sign-in: {result:?}"
            );
        }
    });
    node.set_login(Login::Normal);
    std::thread::sleep(Duration::from_secs(2));
    let after =
        rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(2), message("after")));
    assert!(after.is_ok(), "{after:?}");
    std::thread::sleep(Duration::from_millis(500));
    let stored: BTreeSet<Bytes> = node
        .stored()
        .iter()
        .flat_map(|b| b.payloads.clone())
        .collect();
    for payload in &dropped {
        assert!(
            !stored.contains(&Bytes::from(payload.clone())),
            "{payload} was stored after its caller dropped it"
        );
    }
    rt.block_on(client.shutdown());
}

// 3. Shutdown in a storm --------------------------------------------------------------------

/// Twelve tasks keep making evicting requests and four keep sending; shutdown comes in the
/// middle. Shutdown returns promptly, every task ends within a bounded time with an
/// eviction, a shutdown or a closed client (never a hang), and nothing reaches the node
/// afterwards.
#[test]
fn tokio_shutdown_during_an_eviction_storm_ends_every_caller_and_writes_nothing_after() {
    let node = ScriptedNode::start();
    let rt = runtime();
    let mut config = short_config(vec![node.seed()]);
    config.request_timeout = Duration::from_secs(10);
    let client = rt.block_on(Client::connect(config)).unwrap();
    rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(0), message("warm")))
        .unwrap();
    let mut handles = Vec::new();
    for tag in 0..12u64 {
        let client = client.clone();
        handles.push(rt.spawn(async move {
            let mut seen = Vec::new();
            for round in 0..1_000u64 {
                let plane = if round % 2 == 0 {
                    Plane::Session
                } else {
                    Plane::MetadataWrite
                };
                let result = client
                    .request(raw(EVICTING_CODE, tag * 10_000 + round, plane))
                    .await;
                let over = matches!(
                    result,
                    Err(ClientError::Closed | ClientError::Request(RequestError::Shutdown))
                );
                seen.push(result);
                if over {
                    break;
                }
            }
            seen
        }));
    }
    for i in 0..4u32 {
        let client = client.clone();
        handles.push(rt.spawn(async move {
            let mut seen = Vec::new();
            for round in 0..1_000u32 {
                let result = client
                    .send(
                        1u32,
                        1u32,
                        Partitioning::partition_id(i % 3),
                        message(&format!("{i}.{round}")),
                    )
                    .await
                    .map(iggy_route_core::Reply::Sent);
                let over = matches!(
                    result,
                    Err(ClientError::Closed | ClientError::Request(RequestError::Shutdown))
                );
                seen.push(result);
                if over {
                    break;
                }
            }
            seen
        }));
    }
    std::thread::sleep(Duration::from_millis(1_200));
    let started = Instant::now();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), client.shutdown())
            .await
            .expect("shutdown within 5 s");
    });
    let shut_at = Instant::now();
    assert!(started.elapsed() < Duration::from_secs(5));
    rt.block_on(async {
        for handle in handles {
            let seen = tokio::time::timeout(Duration::from_secs(6), handle)
                .await
                .expect("a caller still waits 6 s after shutdown")
                .unwrap();
            for result in seen {
                match result {
                    Ok(_)
                    | Err(
                        ClientError::Closed
                        | ClientError::Request(
                            RequestError::Shutdown
                            | RequestError::Evicted { .. }
                            | RequestError::TimedOut { .. },
                        ),
                    ) => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let late = node.arrivals().iter().filter(|a| a.at > shut_at).count();
    assert_eq!(
        late, 0,
        "{late} requests reached the node after shutdown returned"
    );
}

// 4. Deadlines shorter than the budget's wait --------------------------------------------------

/// A 600 ms deadline, sixteen evicting requests at once (sixteen sessions ended, four
/// sign-ins a second): every call returns within its deadline plus scheduling slack, ends
/// evicted or timed out, and the node saw each at most once.
#[test]
fn tokio_deadlines_shorter_than_the_sign_in_wait_end_on_time() {
    let node = ScriptedNode::start();
    let rt = runtime();
    let mut config = short_config(vec![node.seed()]);
    let timeout = Duration::from_millis(600);
    config.request_timeout = timeout;
    let client = rt.block_on(Client::connect(config)).unwrap();
    let results = rt.block_on(async {
        let mut handles = Vec::new();
        for tag in 0..16u64 {
            let client = client.clone();
            handles.push(tokio::spawn(async move {
                let started = Instant::now();
                let result = client
                    .request(raw(EVICTING_CODE, tag, Plane::Session))
                    .await;
                (started.elapsed(), result)
            }));
        }
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.unwrap());
        }
        out
    });
    let mut evicted = 0;
    let mut timed_out = 0;
    for (tag, (took, result)) in results.iter().enumerate() {
        // The adapter may make a call wait for room for one more request_timeout.
        assert!(
            *took <= 2 * timeout + Duration::from_millis(1_000),
            "tag {tag} took {took:?}: {result:?}"
        );
        if is_scripted_eviction(result) {
            evicted += 1;
        } else if is_timed_out(result) {
            timed_out += 1;
        } else {
            panic!("tag {tag}: {result:?}");
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let written = node.stats().requests(EVICTING_CODE);
    assert!(
        written >= evicted && written <= evicted + timed_out,
        "{written} written for {evicted} evicted and {timed_out} timed out"
    );
    let sent = rt.block_on(client.send(1u32, 1u32, Partitioning::partition_id(0), message("ok")));
    assert!(sent.is_ok(), "{sent:?}");
    rt.block_on(client.shutdown());
}

// 5. The loopback cluster: every plane -------------------------------------------------------

/// Against the loopback cluster (three nodes, partition 0's primary on node 1, partition
/// 1's on node 2, metadata leader node 0), a command the cluster retired is asked for on
/// every plane from many tasks at once, amid sends: each ends evicted
/// (`InvalidRequestOperation`, the SDK's `InvalidCommand`) and the cluster counts exactly
/// one frame per call; every send is stored exactly once; login codes as raw commands are
/// refused and never reach a node.
#[test]
fn tokio_a_retired_command_on_every_plane_from_many_tasks_is_evicted_once_each() {
    let rt = runtime();
    let cluster = rt.block_on(TestCluster::start(3));
    let (stream, topic) = cluster.create_stream_and_topic("s", "t", 2);
    rt.block_on(cluster.split_primaries(stream, topic, 1, 2, 0));
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(15);
    config.data_links_per_node = 2;
    let client = rt.block_on(Client::connect(config)).unwrap();
    for partition in 0..2 {
        rt.block_on(client.send(
            stream,
            topic,
            Partitioning::partition_id(partition),
            message("warm"),
        ))
        .unwrap();
    }
    let planes = [
        Plane::Session,
        Plane::MetadataRead,
        Plane::MetadataWrite,
        partition_plane(stream, topic, 0, true),
        partition_plane(stream, topic, 1, false),
    ];
    let started = Instant::now();
    let (retired, sends) = rt.block_on(async {
        let mut retired = Vec::new();
        for tag in 0..20u64 {
            let client = client.clone();
            let plane = planes[(tag % 5) as usize].clone();
            retired.push(tokio::spawn(async move {
                client.request(raw(RETIRED_CODE, tag, plane)).await
            }));
        }
        let mut sends = Vec::new();
        for i in 0..20u32 {
            let client = client.clone();
            sends.push(tokio::spawn(async move {
                client
                    .send(
                        stream,
                        topic,
                        Partitioning::partition_id(i % 2),
                        message(&format!("s{i}")),
                    )
                    .await
            }));
        }
        let mut r = Vec::new();
        for h in retired {
            r.push(h.await.unwrap());
        }
        let mut s = Vec::new();
        for h in sends {
            s.push(h.await.unwrap());
        }
        (r, s)
    });
    let took = started.elapsed();
    for (tag, result) in retired.iter().enumerate() {
        assert!(
            matches!(
                result,
                Err(ClientError::Request(RequestError::Evicted {
                    reason: EvictionReason::InvalidRequestOperation,
                    code: ErrorCode::InvalidCommand,
                }))
            ),
            "tag {tag} on {:?}: {result:?}",
            planes[tag % 5]
        );
    }
    for (i, result) in sends.iter().enumerate() {
        assert!(result.is_ok(), "send {i}: {result:?}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let written: u64 = (0..3)
        .map(|node| cluster.stats(node).requests(RETIRED_CODE))
        .sum();
    assert_eq!(written, 20, "retired frames written for 20 calls");
    for partition in 0..2 {
        assert_eq!(
            cluster.partition_len(stream, topic, partition),
            11,
            "partition {partition}: the warm send and ten sends, each once"
        );
    }
    // Sign-ins: 2 x (2 + 1) a second per node at most, over the whole run.
    let seconds = took.as_secs() + 2;
    for node in 0..3 {
        let connections = cluster.stats(node).connections_total;
        assert!(
            connections <= 6 * seconds + 6,
            "node {node}: {connections} connections in about {seconds} s"
        );
    }
    let before = settled_logins(&cluster);
    for login in [
        code::LOGIN_USER,
        code::LOGIN_REGISTER,
        code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
        code::LOGIN_REGISTER_WITH_PAT,
    ] {
        for plane in &planes {
            let result = rt.block_on(client.request(raw(login, 0, plane.clone())));
            assert!(
                matches!(
                    &result,
                    Err(ClientError::Submit(SubmitError::SessionCommand { code })) if *code == login
                ),
                "code {login} on {plane:?}: {result:?}"
            );
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    for (node, logins_before) in before.iter().enumerate() {
        let stats = cluster.stats(node);
        assert_eq!(stats.requests(code::LOGIN_USER), 0, "node {node}");
        assert_eq!(
            stats.requests(code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN),
            0,
            "node {node}"
        );
        assert_eq!(
            stats.logins, *logins_before,
            "node {node}: a login was made"
        );
    }
    rt.block_on(client.shutdown());
    rt.block_on(cluster.shutdown());
}

/// Each node's count of logins once it has stopped moving: links the evictions closed are
/// dialled again after a backoff of up to `reconnect_backoff_max` (2 s), and each signs in,
/// so a count read at once may still grow on a slow machine. Waits until no count moved for
/// longer than that backoff, and at most 20 s.
fn settled_logins(cluster: &TestCluster) -> Vec<u64> {
    let quiet = Duration::from_millis(2_500);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = (0..3)
        .map(|node| cluster.stats(node).logins)
        .collect::<Vec<_>>();
    let mut since = Instant::now();
    while since.elapsed() < quiet && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now: Vec<u64> = (0..3).map(|node| cluster.stats(node).logins).collect();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    last
}
