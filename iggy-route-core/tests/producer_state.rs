//! The background producer's state, driven directly with `now`, as an adversary would:
//! flushes while calls wait, deadlines passing mid-batch, shutdowns with waiters, batches
//! failing beside others that succeed, and calls that could never fit.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The test is the adapter here: it owns the clock, and passes `now` in.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::{
    Backpressure, Batch, ErrorCallback, Handles, LONGEST_PRODUCER_WAIT, Offered, OnError, Output,
    ProducerConfig, ProducerError, ProducerKey, ProducerSettings, ProducerState, ProducerStats,
    Refusal, SendFailure,
};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{NodeId, Request, RequestError, SendReceipt, SubmitError};

/// Where a test handle's answer lands.
type Slot<T> = Rc<RefCell<Option<T>>>;

struct Slots;

impl Handles for Slots {
    type Waiter = Slot<Result<(), ClientError>>;
    type Delivery = Slot<Result<SendReceipt, SendFailure>>;
    type Flush = Slot<Result<(), ProducerError>>;

    fn admit(waiter: Self::Waiter, outcome: Result<(), ClientError>) {
        assert!(waiter.replace(Some(outcome)).is_none(), "told twice");
    }

    fn deliver(delivery: Self::Delivery, outcome: Result<SendReceipt, SendFailure>) {
        assert!(delivery.replace(Some(outcome)).is_none(), "told twice");
    }

    fn flush_over(done: Self::Flush, report: Result<(), ProducerError>) {
        assert!(done.replace(Some(report)).is_none(), "told twice");
    }
}

fn slot<T>() -> Slot<T> {
    Rc::new(RefCell::new(None))
}

fn messages(count: usize) -> Vec<Message> {
    (0..count)
        .map(|_| Message {
            payload: Bytes::from_static(b"m"),
            ..Message::default()
        })
        .collect()
}

fn receipt(base: u64, messages: u32) -> SendReceipt {
    SendReceipt {
        partition_id: 1,
        base_offset: Some(base),
        messages,
        node: NodeId(0),
        replica: None,
    }
}

const LINGER: Duration = Duration::from_secs(60);

/// A batch's failure that leaves the client (and so the producer) running.
const UNEXPECTED: ClientError = ClientError::UnexpectedReply { operation: "send" };

fn state(backpressure: Backpressure, has_callback: bool) -> ProducerState<Slots> {
    let config = ProducerConfig {
        batch_length: 100,
        linger_time: LINGER,
        max_buffered_messages: 4,
        max_in_flight: 2,
        backpressure,
        ..ProducerConfig::default()
    };
    let mut settings = ProducerSettings::new(Identifier::from(1u32), Identifier::from(2u32));
    settings.config = config;
    if has_callback {
        settings.on_error = Some(Arc::new(drop));
    }
    ProducerState::new(&settings)
}

/// A call's delivery and, if it waits, its waiter.
struct Call {
    delivery: Slot<Result<SendReceipt, SendFailure>>,
    waiter: Slot<Result<(), ClientError>>,
    offered: Result<Offered, ClientError>,
}

fn send(state: &mut ProducerState<Slots>, now: Instant, count: usize) -> Call {
    let (delivery, waiter) = (slot(), slot());
    let offered = state
        .send(now, messages(count), Rc::clone(&delivery), || {
            Some(Rc::clone(&waiter))
        })
        .map_err(|refusal| {
            assert!(
                refusal.delivery.borrow().is_none(),
                "a refused call is told nothing"
            );
            refusal.error
        });
    Call {
        delivery,
        waiter,
        offered,
    }
}

/// Carries out every output: batches are returned, the rest told (failures to `log`).
fn drain(state: &mut ProducerState<Slots>, log: Option<&OnError>) -> Vec<Batch> {
    std::iter::from_fn(|| state.poll_output())
        .filter_map(|output| output.tell(log))
        .collect()
}

fn batch_len(batch: &Batch) -> usize {
    let Request::Send(send) = &batch.request else {
        panic!("a batch is a send");
    };
    send.messages.len()
}

#[test]
fn zero_length_and_over_size_calls_are_refused_and_nothing_is_held() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    let empty = send(&mut state, now, 0);
    assert!(matches!(
        empty.offered,
        Err(ClientError::Submit(SubmitError::EmptyBatch))
    ));
    let huge = send(&mut state, now, 5);
    assert!(
        matches!(huge.offered, Err(ClientError::Invalid(_))),
        "a call larger than the buffer can never fit: not a queue to retry"
    );
    assert!(huge.waiter.borrow().is_none());
    assert_eq!(state.stats(), ProducerStats::default());
    let done = slot();
    assert!(state.flush(Rc::clone(&done)).is_none());
    state.pump(now);
    assert!(drain(&mut state, None).is_empty());
    assert!(matches!(*done.borrow(), Some(Ok(()))));
}

#[test]
fn a_flush_while_a_call_waits_for_room_ends_with_the_calls_before_it() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    let held = send(&mut state, now, 4);
    assert!(matches!(held.offered, Ok(Offered::Buffered { wake: true })));
    let waiting = send(&mut state, now, 2);
    assert!(matches!(waiting.offered, Ok(Offered::Waiting(_))));
    // A small call that would fit behind it does not overtake it.
    let behind = send(&mut state, now, 1);
    assert!(matches!(behind.offered, Ok(Offered::Waiting(_))));
    let done = slot();
    assert!(state.flush(Rc::clone(&done)).is_none());
    state.pump(now);
    let batches = drain(&mut state, None);
    assert!(
        matches!(*waiting.waiter.borrow(), Some(Ok(()))),
        "room freed"
    );
    assert!(
        matches!(*behind.waiter.borrow(), Some(Ok(()))),
        "then the next in line"
    );
    // While the flush is pending nothing lingers: the calls let in go at once too.
    assert_eq!(batches.iter().map(batch_len).collect::<Vec<_>>(), [4, 3]);
    assert!(done.borrow().is_none(), "the four are not acknowledged yet");
    state.complete(batches[0].id, Ok(receipt(10, 4)));
    drain(&mut state, None);
    assert!(
        matches!(*done.borrow(), Some(Ok(()))),
        "over without the later calls"
    );
    assert_eq!(
        held.delivery
            .borrow()
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .base_offset,
        Some(10)
    );
    assert!(waiting.delivery.borrow().is_none(), "not acknowledged yet");
    state.complete(batches[1].id, Ok(receipt(14, 3)));
    drain(&mut state, None);
    assert_eq!(
        behind
            .delivery
            .borrow()
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .base_offset,
        Some(16),
        "its own offsets, after the call before it in the batch"
    );
}

#[test]
fn a_deadline_passing_mid_batch_refuses_the_waiting_call_and_only_it() {
    let start = Instant::now();
    let patience = Duration::from_millis(100);
    let mut state = state(Backpressure::BlockWithTimeout(patience), false);
    let held = send(&mut state, start, 4);
    let now = start + LINGER;
    state.pump(now);
    let batches = drain(&mut state, None);
    assert_eq!(batches.len(), 1, "lingered out");
    // The batch is out: its room is free again, and a call fills it.
    let fits = send(&mut state, now, 4);
    assert!(matches!(fits.offered, Ok(Offered::Buffered { .. })));
    let late = send(&mut state, now, 1);
    assert!(matches!(late.offered, Ok(Offered::Waiting(_))));
    assert_eq!(
        state.poll_timeout(),
        Some(now + patience),
        "the deadline comes first"
    );
    state.pump(now + patience - Duration::from_millis(1));
    assert!(drain(&mut state, None).is_empty());
    assert!(late.waiter.borrow().is_none(), "not before its deadline");
    state.pump(now + patience);
    assert!(drain(&mut state, None).is_empty());
    assert!(matches!(
        *late.waiter.borrow(),
        Some(Err(ClientError::QueueFull { limit: 4 }))
    ));
    assert!(late.delivery.borrow().is_none());
    state.complete(batches[0].id, Ok(receipt(0, 4)));
    drain(&mut state, None);
    assert!(held.delivery.borrow().as_ref().unwrap().is_ok());
    assert_eq!(
        state.stats().buffered_messages,
        4,
        "the fitting call is still held"
    );
    assert_eq!(state.poll_timeout(), Some(now + LINGER));
}

#[test]
fn fail_immediately_and_a_caller_that_cannot_wait_are_refused_at_once() {
    let now = Instant::now();
    let mut state = state(Backpressure::FailImmediately, false);
    send(&mut state, now, 3);
    let refused = send(&mut state, now, 2);
    assert!(matches!(
        refused.offered,
        Err(ClientError::QueueFull { limit: 4 })
    ));
    assert!(matches!(
        send(&mut state, now, 1).offered,
        Ok(Offered::Buffered { .. })
    ));
    let mut blocking = self::state(Backpressure::Block, false);
    send(&mut blocking, now, 4);
    let own_thread = blocking.send(now, messages(1), slot(), || None);
    assert!(matches!(
        own_thread,
        Err(Refusal {
            error: ClientError::QueueFull { limit: 4 },
            ..
        })
    ));
}

#[test]
fn a_shutdown_with_waiters_refuses_them_sends_the_rest_and_ends_after_the_answers() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    let held = send(&mut state, now, 4);
    let waiting = send(&mut state, now, 1);
    let done = slot();
    assert!(state.shutdown(Some(Rc::clone(&done))).is_none());
    assert!(matches!(
        send(&mut state, now, 1).offered,
        Err(ClientError::Closed)
    ));
    state.pump(now);
    let batches = drain(&mut state, None);
    assert!(matches!(
        *waiting.waiter.borrow(),
        Some(Err(ClientError::Closed))
    ));
    assert_eq!(
        batches.len(),
        1,
        "what was buffered goes without its linger"
    );
    assert!(!state.is_finished() && done.borrow().is_none());
    state.complete(batches[0].id, Err(ClientError::Closed));
    drain(&mut state, None);
    assert!(state.is_finished());
    assert!(matches!(
        *done.borrow(),
        Some(Err(ProducerError::SendsFailed { messages: 4, .. }))
    ));
    let failure = held.delivery.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!(failure.messages.len(), 4, "the messages come back");
    assert!(state.end(false, VecDeque::new()).is_empty());
    let (_, report) = state.flush(slot()).expect("over at once once ended");
    assert!(report.is_ok(), "the failures were reported once");
}

#[test]
fn a_batch_failing_while_another_succeeds_reaches_the_callback_in_call_order() {
    let now = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log: ErrorCallback = {
        let seen = Arc::clone(&seen);
        Arc::new(move |failure: SendFailure| seen.lock().unwrap().push(failure.messages.len()))
    };
    let log = OnError::new(log, ProducerKey::unique());
    let mut state = state(Backpressure::Block, true);
    let first = send(&mut state, now, 1);
    let second = send(&mut state, now, 2);
    state.pump(now + LINGER);
    let one = drain(&mut state, Some(&log));
    let third = send(&mut state, now + LINGER, 3);
    let done = slot();
    state.flush(Rc::clone(&done));
    state.pump(now + LINGER);
    let two = drain(&mut state, Some(&log));
    assert_eq!((one.len(), two.len()), (1, 1));
    assert_eq!((batch_len(&one[0]), batch_len(&two[0])), (3, 3));
    // Answered out of order: the later batch first.
    state.complete(two[0].id, Ok(receipt(7, 3)));
    state.complete(one[0].id, Err(ClientError::Closed));
    state.complete(one[0].id, Ok(receipt(0, 3)));
    drain(&mut state, Some(&log));
    assert_eq!(
        *seen.lock().unwrap(),
        [1, 2],
        "each failed call once, in call order"
    );
    assert!(first.delivery.borrow().as_ref().unwrap().is_err());
    assert!(second.delivery.borrow().as_ref().unwrap().is_err());
    assert_eq!(
        third
            .delivery
            .borrow()
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .base_offset,
        Some(7)
    );
    assert!(
        matches!(*done.borrow(), Some(Ok(()))),
        "the callback took the failures: the flush does not count them"
    );
    let stats = state.stats();
    assert_eq!((stats.sent_messages, stats.failed_messages), (3, 3));
}

#[test]
fn a_cancelled_waiter_leaves_the_line_and_the_next_one_gets_in() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    send(&mut state, now, 4);
    let cancelled = send(&mut state, now, 4);
    let next = send(&mut state, now, 1);
    let Ok(Offered::Waiting(id)) = cancelled.offered else {
        panic!("it should wait");
    };
    assert!(state.cancel(id).is_some());
    assert!(state.cancel(id).is_none(), "gone already");
    state.flush(slot());
    state.pump(now);
    let batches = drain(&mut state, None);
    assert!(matches!(*next.waiter.borrow(), Some(Ok(()))));
    assert!(cancelled.waiter.borrow().is_none());
    assert_eq!(
        batches.iter().map(batch_len).sum::<usize>(),
        5,
        "the four, then the one"
    );
}

#[test]
fn an_abnormal_end_tells_everyone_still_waiting_and_later_calls_fail() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    let in_flight = send(&mut state, now, 4);
    state.flush(slot());
    state.pump(now);
    drain(&mut state, None);
    let buffered = send(&mut state, now, 4);
    let waiting = send(&mut state, now, 1);
    let flush = slot();
    state.flush(Rc::clone(&flush));
    for output in state.end(true, VecDeque::new()) {
        output.tell(None);
    }
    let lost = in_flight.delivery.borrow_mut().take().unwrap().unwrap_err();
    assert!(
        lost.messages.is_empty(),
        "they went with their batch and may be stored"
    );
    let back = buffered.delivery.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!(back.messages.len(), 4, "never sent: the messages come back");
    assert!(matches!(
        *waiting.waiter.borrow(),
        Some(Err(ClientError::Closed))
    ));
    assert!(matches!(*flush.borrow(), Some(Err(ProducerError::Stopped))));
    assert!(matches!(
        send(&mut state, now, 1).offered,
        Err(ClientError::Closed)
    ));
    let (_, report) = state.shutdown(Some(slot())).unwrap();
    assert!(matches!(report, Err(ProducerError::Stopped)));
}

/// Makes one setting invalid.
type Spoil = fn(&mut ProducerConfig);

/// A panicking `on_error` unwinds past the outputs the adapter had taken and not told yet.
/// They go back to `end`, so that the flush among them hears `Stopped` only once the
/// producer refuses calls, and the settled call keeps its outcome without the callback.
#[test]
fn outputs_a_panicking_callback_left_untold_are_told_after_the_end() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, true);
    let call = send(&mut state, now, 4);
    let flush = slot();
    state.flush(Rc::clone(&flush));
    state.pump(now);
    let batches = drain(&mut state, None);
    state.complete(batches[0].id, Err(ClientError::Closed));
    state.pump(now);
    let untold: VecDeque<_> = std::iter::from_fn(|| state.poll_output()).collect();
    assert_eq!(untold.len(), 2, "the failure, then the flush: {untold:?}");
    let outputs = state.end(true, untold);
    assert!(matches!(
        send(&mut state, now, 1).offered,
        Err(ClientError::Closed)
    ));
    let calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&calls);
    let callback: ErrorCallback = Arc::new(move |_| *counted.lock().unwrap() += 1);
    let callback = OnError::new(callback, ProducerKey::unique());
    for output in outputs {
        assert!(output.tell(Some(&callback)).is_none(), "nothing to submit");
    }
    let failure = call.delivery.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!(failure.messages.len(), 4, "the outcome stands");
    // An answer that came while the callback ran (mio's I/O thread answers then) queued a
    // flush's `Ok`: it too is told only after the end, and says `Stopped`.
    let mut state = self::state(Backpressure::Block, true);
    let _ok = send(&mut state, now, 1);
    let queued = slot();
    state.flush(Rc::clone(&queued));
    state.pump(now);
    let batches = drain(&mut state, None);
    state.complete(batches[0].id, Ok(receipt(0, 1)));
    for output in state.end(true, VecDeque::new()) {
        output.tell(None);
    }
    assert!(matches!(
        *queued.borrow(),
        Some(Err(ProducerError::Stopped))
    ));
    assert_eq!(
        *calls.lock().unwrap(),
        0,
        "the callback is not called again"
    );
    assert!(matches!(*flush.borrow(), Some(Err(ProducerError::Stopped))));
}

/// While a producer's `on_error` runs, the thread knows it is that producer's callback (and
/// no other producer's), so calls it makes into its producer do not wait for the producer;
/// the mark is gone once the callback returns, and also when it panics.
#[test]
fn a_callback_is_known_as_its_own_producers_while_it_runs_and_only_then() {
    let now = Instant::now();
    let (ours, theirs) = (ProducerKey::unique(), ProducerKey::unique());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let callback: ErrorCallback = {
        let seen = Arc::clone(&seen);
        Arc::new(move |failure: SendFailure| {
            seen.lock()
                .unwrap()
                .push((ours.in_its_callback(), theirs.in_its_callback()));
            assert!(failure.messages.len() != 2, "the application's panic");
        })
    };
    let on_error = OnError::new(callback, ours);
    let mut state = state(Backpressure::Block, true);
    for count in [1, 2] {
        let _call = send(&mut state, now, count);
        state.pump(now + LINGER);
        let batches = drain(&mut state, None);
        state.complete(batches[0].id, Err(UNEXPECTED));
        state.pump(now + LINGER);
        for output in std::iter::from_fn(|| state.poll_output()) {
            let settled = matches!(output, Output::Settled { .. });
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                output.tell(Some(&on_error))
            }));
            assert_eq!(told.is_err(), settled && count == 2);
        }
        assert!(!ours.in_its_callback(), "after call {count}");
    }
    assert_eq!(*seen.lock().unwrap(), [(true, false), (true, false)]);
}

/// Flushes that end at the same moment (called from several threads) each report the
/// failures since the last report, so none says `Ok` over a failure before it; the next
/// flush reports none of them again, and the stats count each failed message once.
#[test]
fn flushes_that_end_together_each_report_the_same_failures_once() {
    let now = Instant::now();
    let mut state = state(Backpressure::Block, false);
    let _call = send(&mut state, now, 3);
    let (first, second) = (slot(), slot());
    assert!(state.flush(Rc::clone(&first)).is_none());
    assert!(state.flush(Rc::clone(&second)).is_none());
    state.pump(now);
    let batches = drain(&mut state, None);
    state.complete(batches[0].id, Err(ClientError::Closed));
    drain(&mut state, None);
    for flush in [&first, &second] {
        assert!(matches!(
            *flush.borrow(),
            Some(Err(ProducerError::SendsFailed { messages: 3, .. }))
        ));
    }
    let later = slot();
    assert!(state.flush(Rc::clone(&later)).is_none());
    let shut = slot();
    assert!(state.shutdown(Some(Rc::clone(&shut))).is_none());
    state.pump(now);
    drain(&mut state, None);
    assert!(
        matches!(*later.borrow(), Some(Ok(()))),
        "reported once: {later:?}"
    );
    assert!(matches!(*shut.borrow(), Some(Ok(()))), "{shut:?}");
    assert_eq!(state.stats().failed_messages, 3);
    // A shutdown that ends with flushes shares their report.
    let mut state = self::state(Backpressure::Block, false);
    let _call = send(&mut state, now, 2);
    let (flush, shut) = (slot(), slot());
    assert!(state.flush(Rc::clone(&flush)).is_none());
    assert!(state.shutdown(Some(Rc::clone(&shut))).is_none());
    state.pump(now);
    let batches = drain(&mut state, None);
    state.complete(batches[0].id, Err(UNEXPECTED));
    drain(&mut state, None);
    for done in [&flush, &shut] {
        assert!(
            matches!(
                *done.borrow(),
                Some(Err(ProducerError::SendsFailed { messages: 2, .. }))
            ),
            "{done:?}"
        );
    }
}

/// A batch that finds the client gone (shut down, or its task or thread stopped) stops the
/// producer as a shutdown does: nothing it holds could go, so later calls fail `Closed` at
/// once instead of being taken and failed one by one; what it held fails and is reported.
#[test]
fn a_batch_that_finds_the_client_gone_stops_the_producer() {
    for gone in [
        ClientError::Closed,
        ClientError::Request(RequestError::Shutdown),
        ClientError::Submit(SubmitError::Closed),
    ] {
        let now = Instant::now();
        let mut state = state(Backpressure::Block, false);
        let _first = send(&mut state, now, 1);
        state.pump(now + LINGER);
        let batches = drain(&mut state, None);
        let held = send(&mut state, now + LINGER, 2);
        state.complete(batches[0].id, Err(gone.clone()));
        assert!(
            matches!(send(&mut state, now, 1).offered, Err(ClientError::Closed)),
            "after {gone}"
        );
        state.pump(now + LINGER);
        let rest = drain(&mut state, None);
        assert_eq!(rest.len(), 1, "what was held goes at once, to fail");
        state.complete(rest[0].id, Err(gone.clone()));
        drain(&mut state, None);
        assert!(state.is_finished(), "after {gone}");
        assert!(held.delivery.borrow().as_ref().is_some_and(Result::is_err));
        assert_eq!(state.stats().failed_messages, 3);
        // The loop ends with no flush waiting: the failures stay for the next flush.
        assert!(state.end(false, VecDeque::new()).is_empty());
        let (_, report) = state.flush(slot()).expect("ended: over at once");
        assert!(
            matches!(report, Err(ProducerError::SendsFailed { messages: 3, .. })),
            "after {gone}: {report:?}"
        );
        let (_, again) = state.flush(slot()).expect("ended: over at once");
        assert!(again.is_ok(), "reported once");
    }
    let mut state = state(Backpressure::Block, false);
    let now = Instant::now();
    let _call = send(&mut state, now, 1);
    state.pump(now + LINGER);
    let batches = drain(&mut state, None);
    state.complete(batches[0].id, Err(UNEXPECTED));
    assert!(
        send(&mut state, now, 1).offered.is_ok(),
        "any other failure leaves the producer running"
    );
}

#[test]
fn one_rule_checks_the_settings_of_both_adapters() {
    let day = LONGEST_PRODUCER_WAIT;
    let valid = ProducerConfig {
        linger_time: day,
        backpressure: Backpressure::BlockWithTimeout(day),
        ..ProducerConfig::default()
    };
    assert!(valid.validate_background().is_ok(), "a day is accepted");
    let cases: [(Spoil, &str); 6] = [
        (|c| c.batch_length = 0, "batch_length"),
        (|c| c.batch_size = 0, "batch_size"),
        (|c| c.max_buffered_bytes = 0, "max_buffered_bytes"),
        (|c| c.max_in_flight = 0, "max_in_flight"),
        (|c| c.linger_time = Duration::MAX, "linger_time"),
        (
            |c| c.backpressure = Backpressure::BlockWithTimeout(Duration::MAX),
            "backpressure",
        ),
    ];
    for (spoil, field) in cases {
        let mut config = valid.clone();
        spoil(&mut config);
        let refused = config.validate_background().unwrap_err();
        assert!(refused.to_string().contains(field), "{field}: {refused}");
    }
    let direct = ProducerConfig {
        max_in_flight: 0,
        linger_time: Duration::MAX,
        ..ProducerConfig::default()
    };
    assert!(
        direct.validate_direct().is_ok(),
        "background bounds do not bind a direct one"
    );
}
