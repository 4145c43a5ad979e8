//! Promise 1: the waiting line, its order and its bounds, on both adapters.

use super::*;

/// One partition, room for one request, a line of 40: forty calls started one after the
/// other (staggered) are stored in call order, every one of them.
#[test]
fn a_long_line_behind_one_slot_drains_in_call_order() {
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 40;
            config.max_pending_per_lane = 1;
        });
        // Each call starts on its own task or thread, 20 ms after the one before (so
        // that they reach the client in order); each reply takes 40 ms: the line grows.
        run.hold(0, Duration::from_millis(40));
        let tags: Vec<String> = (0..40).map(|n| format!("c{n}")).collect();
        let calls: Vec<Call> = tags
            .iter()
            .map(|tag| {
                let call = run.send(0, tag);
                thread::sleep(Duration::from_millis(20));
                call
            })
            .collect();
        for call in &calls {
            let (seen, _) = call.outcome();
            assert!(seen.sent(), "{adapter:?} {}: {seen:?}", call.tag);
        }
        // The order the calls were made in, as each task or thread saw it.
        let mut made: Vec<(Instant, String)> = calls
            .iter()
            .map(|call| (*call.entered.get().unwrap(), call.tag.clone()))
            .collect();
        made.sort();
        let gaps: Vec<String> = made
            .windows(2)
            .filter(|pair| pair[1].0 - pair[0].0 < Duration::from_millis(5))
            .map(|pair| format!("{}/{}", pair[0].1, pair[1].1))
            .collect();
        let made: Vec<String> = made.into_iter().map(|(_, tag)| tag).collect();
        assert_eq!(
            run.stored(0),
            made,
            "{adapter:?}: stored out of the order the calls were made (close calls: {gaps:?})"
        );
        run.finish();
    }
}

/// Sixteen callers race for one slot and a line of one: most are refused. Every call
/// ends within its bound, a refused send is never stored, every acknowledged one is
/// stored exactly once, and each caller's stored sends keep its order.
#[test]
fn racing_callers_on_one_slot_never_store_a_refused_send() {
    const CALLERS: usize = 16;
    const SENDS: usize = 15;
    for adapter in BOTH {
        let timeout = Duration::from_secs(2);
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 1;
            config.max_pending_per_lane = 1;
            config.request_timeout = timeout;
        });
        run.hold(0, Duration::from_millis(3));
        run.hold(1, Duration::from_millis(3));
        let results = Arc::new(Mutex::new(Vec::new()));
        let callers: Vec<_> = (0..CALLERS)
            .map(|caller| {
                let results = Arc::clone(&results);
                let client = run.client.clone();
                let handle = run.runtime.handle().clone();
                thread::spawn(move || {
                    let partition = (caller % 2) as u32;
                    for seq in 0..SENDS {
                        let tag = format!("r{caller}-{seq}");
                        let messages = message(&tag);
                        let p = Partitioning::PartitionId(partition);
                        let started = Instant::now();
                        let sent = match &client {
                            AnyClient::Tokio(c) => {
                                handle.block_on(c.send(STREAM, TOPIC, p, messages))
                            }
                            AnyClient::Mio(c) => c.send(STREAM, TOPIC, p, messages),
                        };
                        let took = started.elapsed();
                        results
                            .lock()
                            .unwrap()
                            .push((caller, seq, Seen::of(sent), took));
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        let results = results.lock().unwrap().clone();
        let mut acked = HashSet::new();
        let mut refused = HashSet::new();
        for (caller, seq, seen, took) in &results {
            assert!(
                *took <= timeout + MARGIN,
                "{adapter:?}: r{caller}-{seq} took {took:?} ({seen:?})"
            );
            match seen {
                Seen::Sent(_) => acked.insert(format!("r{caller}-{seq}")),
                Seen::QueueFull => refused.insert(format!("r{caller}-{seq}")),
                other => panic!("{adapter:?}: r{caller}-{seq}: {other:?}"),
            };
        }
        assert!(!refused.is_empty(), "{adapter:?}: nothing was ever refused");
        let mut stored: Vec<String> = run.stored(0);
        stored.extend(run.stored(1));
        let stored_set: HashSet<String> = stored.iter().cloned().collect();
        assert_eq!(stored.len(), stored_set.len(), "{adapter:?}: duplicates");
        assert_eq!(stored_set, acked, "{adapter:?}: stored != acknowledged");
        for caller in 0..CALLERS {
            let prefix = format!("r{caller}-");
            let mine: Vec<usize> = stored
                .iter()
                .filter_map(|t| t.strip_prefix(&prefix))
                .map(|n| n.parse().unwrap())
                .collect();
            let mut sorted = mine.clone();
            sorted.sort_unstable();
            assert_eq!(mine, sorted, "{adapter:?}: caller {caller} out of order");
        }
        run.finish();
    }
}

/// With room for one and a line of one, a third call is refused at once (not after
/// `request_timeout`), and a `try_send` to an idle partition is refused while one waits.
#[test]
fn a_full_line_refuses_at_once_and_a_try_never_jumps_it() {
    for adapter in BOTH {
        let timeout = Duration::from_secs(8);
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 1;
            config.max_pending_per_lane = 1;
            config.request_timeout = timeout;
        });
        run.hold(0, Duration::from_millis(1_500));
        let holding = run.send(0, "holding");
        settle();
        let waiting = run.send(0, "waiting");
        settle();
        let (third, took) = run.send(1, "third").outcome();
        assert_eq!(third, Seen::QueueFull, "{adapter:?}");
        assert!(took < Duration::from_secs(1), "{adapter:?}: {took:?}");
        let (tried, took) = run.try_send(1, "tried");
        assert_eq!(tried, Seen::QueueFull, "{adapter:?}");
        assert!(took < Duration::from_secs(1), "{adapter:?}: {took:?}");
        assert!(holding.outcome().0.sent(), "{adapter:?}");
        assert!(waiting.outcome().0.sent(), "{adapter:?}");
        assert_eq!(run.stored(0), ["holding", "waiting"], "{adapter:?}");
        assert!(run.stored(1).is_empty(), "{adapter:?}");
        run.finish();
    }
}

/// Hundreds wait behind a reply that never comes; shutdown ends each with `Closed`,
/// promptly, and none of them is ever stored.
#[test]
fn shutdown_ends_hundreds_of_waiting_calls_with_closed() {
    const WAITING: usize = 200;
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 256;
            config.max_pending_per_lane = 1;
            config.request_timeout = Duration::from_secs(20);
            config.attempt_timeout = Duration::from_secs(30);
            config.heartbeat_interval = Duration::from_secs(30);
        });
        run.hold(0, Duration::from_secs(60));
        let holding = run.send(0, "holding");
        settle();
        let waiting: Vec<Call> = (0..WAITING)
            .map(|n| run.send(0, &format!("w{n}")))
            .collect();
        thread::sleep(Duration::from_millis(800));
        let started = Instant::now();
        run.shutdown();
        for call in &waiting {
            let (seen, _) = call.outcome();
            assert_eq!(seen, Seen::Closed, "{adapter:?} {}", call.tag);
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{adapter:?}: shutdown took {:?} to end the line",
            started.elapsed()
        );
        let (held, _) = holding.outcome();
        // Stored, its answer held back: it may have been admitted, so not `Shutdown`.
        assert!(matches!(held, Seen::Unknown), "{adapter:?}: {held:?}");
        assert_eq!(run.stored(0), ["holding"], "{adapter:?}");
        assert!(run.stored(1).is_empty(), "{adapter:?}");
        run.finish();
    }
}

/// tokio: futures dropped while they wait are withdrawn: 20 ms later a `try_send` to an
/// idle partition is taken (nothing waits any more), and none of them is ever sent.
#[test]
fn dropped_waiting_futures_are_withdrawn_and_never_sent() {
    let run = Run::start(Adapter::Tokio, |config| {
        config.max_pending_requests = 64;
        config.max_pending_per_lane = 1;
    });
    run.hold(0, Duration::from_millis(3_000));
    let holding = run.send(0, "holding");
    settle();
    let dropped: Vec<Call> = (0..30).map(|n| run.send(0, &format!("d{n}"))).collect();
    settle();
    for call in &dropped {
        call.abort.as_ref().unwrap().abort();
    }
    let aborted = Instant::now();
    // Try an idle partition until the line is seen empty (each refusal is a new input).
    let mut refused = 0;
    let taken_after = loop {
        let (tried, _) = run.try_send(1, "tried");
        if tried.sent() {
            break aborted.elapsed();
        }
        assert_eq!(tried, Seen::QueueFull);
        refused += 1;
        assert!(
            aborted.elapsed() < Duration::from_millis(1_800),
            "never withdrawn"
        );
        thread::sleep(Duration::from_millis(25));
    };
    assert!(
        taken_after < Duration::from_millis(100),
        "dropped waiting calls still block a try {taken_after:?} after the drop ({refused} refusals)"
    );
    assert!(holding.outcome().0.sent());
    let (after, _) = run.send(0, "after").outcome();
    assert!(after.sent());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(run.stored(0), ["holding", "after"]);
    assert_eq!(run.stored(1), ["tried"]);
    run.finish();
}

/// tokio: a future dropped after its request was written (its reply held) does not
/// wedge the client: its room comes back and later calls go through, in order.
#[test]
fn a_dropped_admitted_future_gives_its_room_back() {
    let run = Run::start(Adapter::Tokio, |config| {
        config.max_pending_requests = 1;
        config.max_pending_per_lane = 1;
        config.request_timeout = Duration::from_secs(3);
    });
    run.hold(0, Duration::from_millis(600));
    for round in 0..5 {
        let admitted = run.send(0, &format!("a{round}"));
        thread::sleep(Duration::from_millis(100));
        admitted.abort.as_ref().unwrap().abort();
    }
    // Each round's next call may find the slot taken; wait for the dust to settle.
    thread::sleep(Duration::from_millis(1_000));
    run.hold(0, Duration::ZERO);
    let calls: Vec<Call> = (0..5).map(|n| run.send(0, &format!("n{n}"))).collect();
    for call in &calls {
        let (seen, took) = call.outcome();
        assert!(
            matches!(seen, Seen::Sent(_) | Seen::QueueFull),
            "{}: {seen:?}",
            call.tag
        );
        assert!(took < Duration::from_secs(3) + MARGIN);
    }
    let (last, _) = run.send(0, "last").outcome();
    assert!(last.sent(), "the client is wedged: {last:?}");
    let stored = run.stored(0);
    assert!(stored.ends_with(&["last".to_owned()]), "{stored:?}");
    run.finish();
}

/// Room for five, one per partition: behind a held request, exactly five calls wait;
/// the sixth is refused at once; the five go out in order.
#[test]
fn the_line_holds_exactly_max_pending_requests_calls() {
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 5;
            config.max_pending_per_lane = 1;
        });
        run.hold(0, Duration::from_millis(800));
        let holding = run.send(0, "holding");
        settle();
        let waiting: Vec<Call> = (0..5)
            .map(|n| {
                let call = run.send(0, &format!("w{n}"));
                thread::sleep(Duration::from_millis(10));
                call
            })
            .collect();
        thread::sleep(Duration::from_millis(50));
        let (sixth, took) = run.send(0, "sixth").outcome();
        assert_eq!(sixth, Seen::QueueFull, "{adapter:?}");
        assert!(took < Duration::from_millis(500), "{adapter:?}: {took:?}");
        assert!(holding.outcome().0.sent(), "{adapter:?}");
        for call in &waiting {
            let (seen, _) = call.outcome();
            assert!(seen.sent(), "{adapter:?} {}: {seen:?}", call.tag);
        }
        assert_eq!(
            run.stored(0),
            ["holding", "w0", "w1", "w2", "w3", "w4"],
            "{adapter:?}"
        );
        run.finish();
    }
}

/// Eight callers keep sending to a partition whose replies are held while the client
/// shuts down: every call, those in line and those arriving during and after the
/// shutdown, ends promptly with `Closed` (or `Shutdown`/`QueueFull`), and nothing hangs.
#[test]
fn calls_arriving_while_the_client_shuts_down_all_end() {
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 4;
            config.max_pending_per_lane = 1;
            config.request_timeout = Duration::from_secs(20);
        });
        run.hold(0, Duration::from_secs(60));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let callers: Vec<_> = (0..8)
            .map(|caller| {
                let client = run.client.clone();
                let handle = run.runtime.handle().clone();
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    let mut seen = Vec::new();
                    let mut n = 0;
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        let messages = message(&format!("k{caller}-{n}"));
                        let p = Partitioning::PartitionId(0);
                        let started = Instant::now();
                        let sent = match &client {
                            AnyClient::Tokio(c) => {
                                handle.block_on(c.send(STREAM, TOPIC, p, messages))
                            }
                            AnyClient::Mio(c) => c.send(STREAM, TOPIC, p, messages),
                        };
                        seen.push((Seen::of(sent), started.elapsed()));
                        n += 1;
                    }
                    seen
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(400));
        let started = Instant::now();
        run.shutdown();
        let shutdown_took = started.elapsed();
        thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let (done, joined) = mpsc::channel();
        thread::spawn(move || {
            let seen: Vec<_> = callers
                .into_iter()
                .flat_map(|c| c.join().unwrap())
                .collect();
            let _ = done.send(seen);
        });
        let seen = joined
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{adapter:?}: a caller hung after shutdown"));
        assert!(
            shutdown_took < Duration::from_secs(5),
            "{adapter:?}: {shutdown_took:?}"
        );
        for (outcome, took) in &seen {
            assert!(
                matches!(
                    outcome,
                    Seen::Closed | Seen::Shutdown | Seen::Unknown | Seen::QueueFull
                ),
                "{adapter:?}: {outcome:?}"
            );
            assert!(
                *took < Duration::from_secs(5),
                "{adapter:?}: {outcome:?} {took:?}"
            );
        }
        assert!(seen.iter().any(|(o, _)| *o == Seen::Closed), "{adapter:?}");
        assert!(run.stored(0).len() <= 1, "{adapter:?}: {:?}", run.stored(0));
        run.finish();
    }
}

/// The cluster never sees more than `max_pending_requests` sends at once, nor more than
/// `max_pending_per_lane` for one partition (counted at the nodes while replies are held);
/// every call still goes through, in each partition's call order.
#[test]
fn the_cluster_never_sees_more_than_the_bounds_at_once() {
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 3;
            config.max_pending_per_lane = 2;
        });
        let sends = |node: usize| {
            run.cluster
                .stats(node)
                .requests_by_code
                .get(&101)
                .copied()
                .unwrap_or(0)
        };
        let before = (sends(1), sends(2));
        run.hold(0, Duration::from_millis(1_000));
        run.hold(1, Duration::from_millis(1_000));
        let calls: Vec<Call> = (0..6)
            .flat_map(|n| [(0, n), (1, n)])
            .map(|(partition, n)| {
                let call = run.send(partition, &format!("p{partition}-{n}"));
                thread::sleep(Duration::from_millis(5));
                call
            })
            .collect();
        thread::sleep(Duration::from_millis(500));
        let seen = (sends(1) - before.0, sends(2) - before.1);
        assert!(
            seen.0 <= 2 && seen.1 <= 2 && seen.0 + seen.1 <= 3,
            "{adapter:?}: the nodes saw {seen:?} sends at once"
        );
        let mut refused = 0;
        for call in &calls {
            match call.outcome().0 {
                Seen::Sent(_) => {}
                Seen::QueueFull => refused += 1,
                other => panic!("{adapter:?} {}: {other:?}", call.tag),
            }
        }
        // Three in the router and three in line fit; the other six are refused.
        assert_eq!(refused, 6, "{adapter:?}");
        for partition in 0..2 {
            let stored = run.stored(partition);
            let mut sorted = stored.clone();
            sorted.sort();
            assert_eq!(stored, sorted, "{adapter:?}: partition {partition}");
        }
        run.finish();
    }
}

/// A later call never overtakes one that waits, even to a partition with room: while a
/// send waits for its partition's only place, a send to an idle partition stays in line
/// behind it (the idle partition's node sees nothing) until the first is let in.
#[test]
fn a_later_call_to_an_idle_partition_does_not_overtake_a_waiting_one() {
    for adapter in BOTH {
        let run = Run::start(adapter, |config| {
            config.max_pending_requests = 4;
            config.max_pending_per_lane = 1;
        });
        run.hold(0, Duration::from_millis(1_000));
        let holding = run.send(0, "holding");
        thread::sleep(Duration::from_millis(150));
        let waiting = run.send(0, "waiting");
        thread::sleep(Duration::from_millis(150));
        let later = run.send(1, "later");
        thread::sleep(Duration::from_millis(300));
        let early = run.stored(1);
        for call in [&holding, &waiting, &later] {
            let (seen, _) = call.outcome();
            assert!(seen.sent(), "{adapter:?} {}: {seen:?}", call.tag);
        }
        assert!(
            early.is_empty(),
            "{adapter:?}: the later call overtook the waiting one: {early:?}"
        );
        assert_eq!(run.stored(0), ["holding", "waiting"], "{adapter:?}");
        assert_eq!(run.stored(1), ["later"], "{adapter:?}");
        run.finish();
    }
}

/// tokio: futures dropped while they wait, with no other call made afterwards (nothing
/// else for the client to notice): when the held request is answered, none of them is
/// sent. Seen (every run): exactly one of them (`d0`, `d1` or `d4`: the spawned tasks reach
/// the client in no fixed order) is stored, ~600 ms after its task had finished.
#[test]
fn dropped_waiting_futures_are_not_sent_when_room_comes_without_other_calls() {
    let run = Run::start(Adapter::Tokio, |config| {
        config.max_pending_requests = 8;
        config.max_pending_per_lane = 1;
    });
    run.hold(0, Duration::from_millis(900));
    let holding = run.send(0, "holding");
    thread::sleep(Duration::from_millis(100));
    let dropped: Vec<Call> = (0..6).map(|n| run.send(0, &format!("d{n}"))).collect();
    thread::sleep(Duration::from_millis(200));
    for call in &dropped {
        call.abort.as_ref().unwrap().abort();
    }
    // The futures are gone (their tasks finished) 100 ms later, long before room comes.
    thread::sleep(Duration::from_millis(100));
    for call in &dropped {
        assert!(
            call.abort.as_ref().unwrap().is_finished(),
            "{} not dropped",
            call.tag
        );
    }
    assert!(holding.outcome().0.sent());
    thread::sleep(Duration::from_millis(1_500));
    assert_eq!(run.stored(0), ["holding"], "a dropped call was sent");
    run.finish();
}
