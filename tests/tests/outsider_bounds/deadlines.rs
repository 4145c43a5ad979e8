//! Promise 2: every call ends within its bound whatever the cluster does.

use super::*;

/// Deadlines shorter than a round trip, many callers, room for one: every call (sends,
/// waits and tries) ends within `request_timeout` plus a margin, and a refused call is
/// never stored.
#[test]
fn deadlines_shorter_than_a_round_trip_bound_every_call() {
    for adapter in BOTH {
        let timeout = Duration::from_millis(120);
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 2;
            config.max_pending_per_lane = 1;
        });
        // The warm-up ran with a long deadline; now a short one through a new client.
        let mut config = Config::from_connection_string(&run.cluster.connection_string()).unwrap();
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 1;
        config.request_timeout = timeout;
        let short = Run {
            client: match adapter {
                Adapter::Tokio => AnyClient::Tokio(
                    run.runtime
                        .block_on(iggy_route_tokio::Client::connect(config))
                        .unwrap(),
                ),
                Adapter::Mio => AnyClient::Mio(iggy_route_mio::Client::connect(config).unwrap()),
            },
            ..run
        };
        short.hold(0, Duration::from_millis(400));
        short.hold(1, Duration::from_millis(400));
        let calls: Vec<Call> = (0..40)
            .map(|n| short.send_with(n % 2, &format!("s{n}"), n % 5 == 0))
            .collect();
        let mut refused = Vec::new();
        for call in &calls {
            let (seen, took) = call.outcome();
            assert!(
                took <= timeout + MARGIN,
                "{adapter:?} {}: {took:?} ({seen:?})",
                call.tag
            );
            if seen == Seen::QueueFull {
                refused.push(call.tag.clone());
            }
        }
        thread::sleep(Duration::from_millis(1_000));
        let mut stored = short.stored(0);
        stored.extend(short.stored(1));
        for tag in &refused {
            assert!(
                !stored.contains(tag),
                "{adapter:?}: refused {tag} was stored"
            );
        }
        short.finish();
    }
}

/// A primary that never answers, then a stopped one: sends, waits and tries all end
/// within `request_timeout` plus a margin.
#[test]
fn a_silent_node_and_a_stopped_node_bound_every_call() {
    for adapter in BOTH {
        let timeout = Duration::from_millis(700);
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 3;
            config.max_pending_per_lane = 1;
            config.request_timeout = timeout;
        });
        run.hold(0, Duration::from_secs(600));
        let calls: Vec<Call> = (0..10)
            .map(|n| run.send_with(0, &format!("silent{n}"), n % 3 == 2))
            .collect();
        for call in &calls {
            let (seen, took) = call.outcome();
            assert!(
                took <= timeout + MARGIN,
                "{adapter:?} {}: {took:?} ({seen:?})",
                call.tag
            );
            assert!(!seen.sent(), "{adapter:?} {}: {seen:?}", call.tag);
        }
        run.runtime.block_on(run.cluster.stop_node(2));
        let calls: Vec<Call> = (0..10)
            .map(|n| run.send_with(1, &format!("stopped{n}"), n % 3 == 2))
            .collect();
        for call in &calls {
            let (seen, took) = call.outcome();
            assert!(
                took <= timeout + MARGIN,
                "{adapter:?} {}: {took:?} ({seen:?})",
                call.tag
            );
        }
        run.finish();
    }
}

/// Primaries that misbehave (sends answered "not committed", lying routes, garbage,
/// duplicated and stray replies): every call ends within `request_timeout` plus a margin,
/// and every acknowledged send is stored exactly once.
#[test]
fn misbehaving_primaries_bound_every_call_and_never_duplicate() {
    use iggy_route_tests::cluster::adversary::Misbehaviour;
    let behaviours = [
        Misbehaviour::NotCommitted,
        Misbehaviour::LyingRoutes,
        Misbehaviour::Garbage,
        Misbehaviour::DuplicateReplies,
        Misbehaviour::StrayReplies,
    ];
    let timeout = Duration::from_millis(700);
    let mut failures = Vec::new();
    for adapter in BOTH {
        for behaviour in behaviours {
            let run = Run::start(adapter, |config| {
                config.max_pending_requests = 2;
                config.max_pending_per_lane = 1;
                config.request_timeout = timeout;
            });
            for node in [1, 2] {
                run.cluster
                    .misbehave(node, behaviour, Duration::from_secs(5));
            }
            let calls: Vec<Call> = (0..8)
                .map(|n| run.send_with(n % 2, &format!("m{n}"), n % 4 == 3))
                .collect();
            let mut acked = Vec::new();
            for call in &calls {
                let (seen, took) = call.outcome();
                if took > timeout + MARGIN {
                    failures.push(format!(
                        "{adapter:?} {behaviour:?} {}: {seen:?} after {took:?}",
                        call.tag
                    ));
                }
                if seen.sent() {
                    acked.push(call.tag.clone());
                }
            }
            let mut stored = run.stored(0);
            stored.extend(run.stored(1));
            for tag in &acked {
                let times = stored.iter().filter(|s| *s == tag).count();
                if times != 1 {
                    failures.push(format!(
                        "{adapter:?} {behaviour:?}: acknowledged {tag} stored {times} times"
                    ));
                }
            }
            run.finish();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two bounds, one after the other, as documented (and as Kafka's `max.block.ms` then
/// `delivery.timeout.ms`): a call waits for room at most `request_timeout`, and once let in
/// its request has its own `request_timeout`. A call that waits 800 ms for room and is then
/// sent to a node that answers only after 4 s ends `TimedOut` (or unknown) after the wait
/// plus one `request_timeout`, never later, on both adapters alike. (Found by an outsider,
/// who read "nothing runs past `request_timeout`"; the docs now say both bounds.)
#[test]
fn a_call_let_in_from_the_line_has_its_own_request_timeout_after_the_wait() {
    let timeout = Duration::from_millis(1_000);
    let mut saw = Vec::new();
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 1;
            config.max_pending_per_lane = 1;
            config.request_timeout = timeout;
            config.attempt_timeout = Duration::from_secs(30);
            config.heartbeat_interval = Duration::from_secs(30);
        });
        run.hold(0, Duration::from_millis(900));
        let holding = run.send(0, "holding");
        thread::sleep(Duration::from_millis(100));
        let waiting = run.send(0, "waiting");
        // Requests that reach the node from now on are answered after 4 s: the waiting
        // one, admitted when the holding one is answered (900 ms after that call), is not
        // answered before its deadline.
        thread::sleep(Duration::from_millis(100));
        run.hold(0, Duration::from_secs(4));
        let (held, _) = holding.outcome();
        assert!(held.sent(), "{adapter:?}: {held:?}");
        let (seen, took) = waiting.outcome();
        saw.push((adapter, seen, took));
        run.finish();
    }
    for (adapter, seen, took) in &saw {
        // It waited about 800 ms, then had its own second: it ends after the first bound
        // and within both.
        assert!(
            matches!(seen, Seen::TimedOut | Seen::Unknown)
                && *took > timeout
                && *took < timeout * 2 + Duration::from_millis(400),
            "the waiting call ended {took:?} after it was made ({seen:?}) on {adapter:?}; all: {saw:?}"
        );
    }
}
