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
