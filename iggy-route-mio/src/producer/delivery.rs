//! How a background call's outcome reaches its caller: a [`Delivery`] of its own, or a
//! [`DeliveryQueue`] shared by many calls (made on any threads), where one thread waits
//! for whichever call settles first instead of waiting for the calls one by one, in call
//! order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use iggy_route_core::SendReceipt;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::SendFailure;

/// What a call resolves to: its own receipt, or its messages back with the error.
pub(super) type Outcome = Result<SendReceipt, SendFailure>;

/// The handle of one background send call: resolves to that call's own receipt (its
/// `base_offset` is the offset of the call's first message), or to a [`SendFailure`]
/// carrying the call's messages and the error (one exception: a call in flight when its
/// producer's thread stopped abnormally, a bug, fails with `ClientError::Closed` and no
/// messages, which went with its batch and may be stored). Dropping it is fine: the
/// outcome then goes only to `on_error` or the next flush.
#[derive(Debug)]
pub struct Delivery {
    outcome: mpsc::Receiver<Outcome>,
    received: Option<Outcome>,
}

impl Delivery {
    /// A delivery and the place its outcome goes.
    pub(super) fn new() -> (Self, Notify) {
        // One outcome per call: a slot of one never blocks the producer's thread.
        let (sender, outcome) = mpsc::sync_channel(1);
        let delivery = Self {
            outcome,
            received: None,
        };
        (delivery, Notify::new(Target::Own(sender)))
    }

    /// Waits for the outcome. The wait is bounded: a batch ends within the client's
    /// `request_timeout` of getting room in the router (and waits at most as long for the
    /// room), and a producer that stops settles every call it holds.
    pub fn wait(mut self) -> Outcome {
        if let Some(outcome) = self.received.take() {
            return outcome;
        }
        self.outcome.recv().unwrap_or_else(|_| stopped())
    }

    /// The outcome if it arrives within `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Outcome> {
        if self.received.is_none() {
            self.received = match self.outcome.recv_timeout(timeout) {
                Ok(outcome) => Some(outcome),
                Err(mpsc::RecvTimeoutError::Timeout) => return None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(stopped()),
            };
        }
        self.received.clone()
    }

    /// The outcome if it is known now.
    pub fn try_wait(&mut self) -> Option<Outcome> {
        if self.received.is_none() {
            self.received = match self.outcome.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(mpsc::TryRecvError::Empty) => return None,
                Err(mpsc::TryRecvError::Disconnected) => Some(stopped()),
            };
        }
        self.received.clone()
    }
}

/// One settled call, as a [`DeliveryQueue`] gives it.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// The tag the call was sent with.
    pub tag: u64,
    /// The call's own receipt, or its messages back with the error. One exception: a
    /// call in flight when its producer's thread stopped abnormally (a bug) fails with
    /// `ClientError::Closed` and no messages, which went with its batch and may be stored.
    pub outcome: Result<SendReceipt, SendFailure>,
}

/// What goes through a queue's channel.
#[derive(Debug)]
enum Item {
    Settled(Delivered),
    /// A call counted as pending when it was handed to the producer was refused there
    /// (it goes to no queue) and uncounted: wakes a receiver that waited for it.
    Refused,
}

/// Where the outcomes of calls sent with
/// [`Producer::send_tagged`](super::Producer::send_tagged) go, each with the tag it was
/// sent with, in the order the calls settle. One thread waits on the queue for many
/// calls, of one producer or several, made on any number of threads (each with a
/// [`DeliverySender`] of the queue), and learns of each as soon as it is settled: a slow
/// partition's call does not hide the calls to the others behind it.
///
/// The queue counts the calls it still expects, so a wait on it never outlasts them:
/// [`recv`](Self::recv) returns `None` at once when nothing is pending (a thread that
/// only reads the queue while others send waits with
/// [`recv_timeout`](Self::recv_timeout) instead). Tags are the
/// caller's: the queue neither reads them nor checks that they differ (calls of several
/// producers on one queue want tags that say which producer made them). Outcomes wait in
/// the queue until they are received, failed calls with their messages: a queue nobody
/// reads grows with every call.
///
/// ```no_run
/// # fn example(producer: iggy_route_mio::Producer<iggy_route_mio::producer::Background>)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use iggy_route_mio::Message;
/// use iggy_route_mio::producer::DeliveryQueue;
///
/// let mut queue = DeliveryQueue::new();
/// let reports = queue.sender();
/// for order in 0..100u64 {
///     let message = Message { payload: format!("order {order}").into(), ..Message::default() };
///     // A call refused here (`QueueFull`, `Closed`) goes to no queue.
///     producer.send_tagged(vec![message], order, &reports)?;
/// }
/// while let Some(delivered) = queue.recv() {
///     match delivered.outcome {
///         Ok(receipt) => println!("order {} stored at {:?}", delivered.tag, receipt.base_offset),
///         Err(failure) => eprintln!("order {} failed: {}", delivered.tag, failure.error),
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct DeliveryQueue {
    /// Held here too, so the channel never reads as disconnected: whether an outcome is
    /// still due is what `pending` says.
    sender: DeliverySender,
    receiver: mpsc::Receiver<Item>,
}

/// A handle to send calls' outcomes to a [`DeliveryQueue`], from any thread: pass it to
/// [`Producer::send_tagged`](super::Producer::send_tagged). Cheap to clone.
#[derive(Debug, Clone)]
pub struct DeliverySender {
    channel: mpsc::Sender<Item>,
    /// Calls handed to a producer for this queue whose outcome was not received yet.
    /// Counted before the call is handed on, so the receiver never misses one that is
    /// about to be buffered; a refused one is uncounted at once, and the refusal goes
    /// through the channel to wake a receiver waiting for it.
    pending: Arc<AtomicUsize>,
}

impl Default for DeliveryQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl DeliveryQueue {
    /// An empty queue.
    pub fn new() -> Self {
        let (channel, receiver) = mpsc::channel();
        let sender = DeliverySender {
            channel,
            pending: Arc::new(AtomicUsize::new(0)),
        };
        Self { sender, receiver }
    }

    /// A handle for sending calls' outcomes here.
    pub fn sender(&self) -> DeliverySender {
        self.sender.clone()
    }

    /// Calls sent to this queue whose outcome was not received yet (and, for a moment,
    /// a call being handed to its producer on another thread).
    pub fn pending(&self) -> usize {
        self.sender.pending.load(Ordering::Acquire)
    }

    /// The next settled call, waiting for it; `None` at once when no call is pending. The
    /// wait is bounded as [`Delivery::wait`] is: every call settles within the client's
    /// deadlines, and a producer that stops settles every call it holds.
    pub fn recv(&mut self) -> Option<Delivered> {
        // The queue holds a sender itself: the channel cannot disconnect.
        self.next(|receiver| receiver.recv().ok())
    }

    /// The next settled call if one is settled within `timeout`, else `None`. It waits
    /// even when no call is pending now, for one that another thread may send meanwhile:
    /// the way for a thread that only reads the queue to wait for its senders.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Delivered> {
        let until = Instant::now().checked_add(timeout);
        loop {
            let left = match until {
                Some(until) => until.checked_duration_since(Instant::now())?,
                // Beyond what an instant holds: a day at a time.
                None => Duration::from_secs(24 * 60 * 60),
            };
            match self.receiver.recv_timeout(left).ok()? {
                Item::Settled(delivered) => return Some(self.received(delivered)),
                // Uncounted already: look again.
                Item::Refused => continue,
            }
        }
    }

    /// The next settled call if one is settled now (`None` at once otherwise).
    pub fn try_recv(&mut self) -> Option<Delivered> {
        self.next(|receiver| receiver.try_recv().ok())
    }

    /// The next settled call `take` gets, passing over refusals, while one is pending.
    fn next(
        &mut self,
        mut take: impl FnMut(&mpsc::Receiver<Item>) -> Option<Item>,
    ) -> Option<Delivered> {
        loop {
            if self.pending() == 0 {
                return None;
            }
            match take(&self.receiver)? {
                Item::Settled(delivered) => return Some(self.received(delivered)),
                // Uncounted already: look again.
                Item::Refused => continue,
            }
        }
    }

    fn received(&self, delivered: Delivered) -> Delivered {
        self.sender.pending.fetch_sub(1, Ordering::AcqRel);
        delivered
    }
}

impl DeliverySender {
    /// Where a call sent with `tag` reports; counted as pending from now on.
    pub(super) fn notify(&self, tag: u64) -> Notify {
        self.pending.fetch_add(1, Ordering::AcqRel);
        Notify::new(Target::Queue {
            tag,
            channel: self.channel.clone(),
            pending: Arc::clone(&self.pending),
        })
    }
}

/// Where a settled call's outcome goes. Once [`armed`](Self::armed) (its call buffered),
/// it is never lost silently: dropped without an outcome, on any path (a producer thread
/// that stops, a panic between taking it and handing the outcome on), it tells its
/// caller the call stopped. A [`Delivery`] would read its dropped sender so, but a shared
/// queue cannot tell one call's sender from another's, and would wait for it. Dropped
/// unarmed (the call refused at the door), it tells a queue to stop counting the call.
#[derive(Debug)]
pub(super) struct Notify {
    target: Option<Target>,
    armed: bool,
}

#[derive(Debug)]
enum Target {
    /// The call's own [`Delivery`].
    Own(mpsc::SyncSender<Outcome>),
    /// A [`DeliveryQueue`], with the call's tag.
    Queue {
        tag: u64,
        channel: mpsc::Sender<Item>,
        pending: Arc<AtomicUsize>,
    },
}

impl Target {
    /// Never blocks: a delivery's slot holds its one outcome, and a queue is unbounded
    /// (bounded in practice by the calls its owner sent). A delivery or queue its caller
    /// dropped is not an error.
    fn send(self, outcome: Outcome) {
        match self {
            Self::Own(sender) => {
                let _ = sender.send(outcome);
            }
            Self::Queue { tag, channel, .. } => {
                let _ = channel.send(Item::Settled(Delivered { tag, outcome }));
            }
        }
    }

    fn refused(self) {
        if let Self::Queue {
            channel, pending, ..
        } = self
        {
            pending.fetch_sub(1, Ordering::AcqRel);
            let _ = channel.send(Item::Refused);
        }
    }
}

impl Notify {
    fn new(target: Target) -> Self {
        Self {
            target: Some(target),
            armed: false,
        }
    }

    /// The call is buffered: from now on its caller expects an outcome. Before, a call
    /// refused at the door goes to no queue (its sender got the error), only uncounted.
    pub(super) fn armed(mut self) -> Self {
        self.armed = true;
        self
    }

    /// The call was not buffered after all (its sender got the error): a queue stops
    /// counting it.
    pub(super) fn refused(mut self) {
        self.armed = false;
    }

    /// Hands the outcome on.
    pub(super) fn send(mut self, outcome: Outcome) {
        if let Some(target) = self.target.take() {
            target.send(outcome);
        }
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        match self.target.take() {
            Some(target) if self.armed => target.send(stopped()),
            Some(target) => target.refused(),
            None => {}
        }
    }
}

/// The outcome of a call whose producer stopped abnormally with the call in flight (its
/// messages went with the batch).
fn stopped() -> Outcome {
    Err(SendFailure {
        messages: Vec::new(),
        error: ClientError::Closed,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn receipt(base_offset: u64) -> SendReceipt {
        SendReceipt {
            partition_id: 1,
            base_offset: Some(base_offset),
            messages: 1,
            node: iggy_route_core::NodeId(0),
            replica: None,
        }
    }

    #[test]
    fn an_empty_queue_answers_recv_at_once_and_recv_timeout_after_its_timeout() {
        let mut queue = DeliveryQueue::new();
        assert!(queue.recv().is_none());
        assert!(queue.try_recv().is_none());
        let started = Instant::now();
        assert!(queue.recv_timeout(Duration::from_millis(20)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(queue.pending(), 0);
    }

    #[test]
    fn recv_timeout_waits_for_a_call_another_thread_sends_meanwhile() {
        let mut queue = DeliveryQueue::new();
        let sender = queue.sender();
        let sending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            sender.notify(6).armed().send(Ok(receipt(9)));
        });
        let delivered = queue.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(delivered.tag, 6);
        sending.join().unwrap();
    }

    #[test]
    fn outcomes_come_in_the_order_they_settle_with_their_tags() {
        let mut queue = DeliveryQueue::new();
        let sender = queue.sender();
        let first = sender.notify(7).armed();
        let second = sender.notify(8).armed();
        assert_eq!(queue.pending(), 2);
        assert!(queue.try_recv().is_none(), "nothing settled yet");
        second.send(Ok(receipt(40)));
        // Lost on some path without an outcome: the queue hears the call stopped.
        drop(first);
        let delivered = queue.recv().unwrap();
        assert_eq!(delivered.tag, 8);
        assert_eq!(delivered.outcome.unwrap().base_offset, Some(40));
        assert_eq!(queue.pending(), 1);
        let delivered = queue.recv_timeout(Duration::from_secs(1)).unwrap();
        assert_eq!(delivered.tag, 7);
        assert!(matches!(
            delivered.outcome,
            Err(SendFailure {
                error: ClientError::Closed,
                ..
            })
        ));
        assert_eq!(queue.pending(), 0);
        assert!(queue.recv().is_none());
    }

    #[test]
    fn a_pending_call_not_settled_yet_times_out() {
        let mut queue = DeliveryQueue::new();
        let _notify = queue.sender().notify(1).armed();
        assert!(queue.recv_timeout(Duration::from_millis(10)).is_none());
        assert_eq!(queue.pending(), 1, "still expected");
    }

    #[test]
    fn a_timeout_too_long_for_an_instant_still_gets_the_outcome() {
        let mut queue = DeliveryQueue::new();
        queue.sender().notify(5).armed().send(Ok(receipt(1)));
        let delivered = queue.recv_timeout(Duration::MAX).unwrap();
        assert_eq!(delivered.tag, 5);
    }

    #[test]
    fn a_delivery_whose_producer_stopped_reads_closed() {
        let (mut delivery, notify) = Delivery::new();
        assert!(delivery.try_wait().is_none());
        drop(notify.armed());
        assert!(matches!(
            delivery.try_wait(),
            Some(Err(SendFailure {
                error: ClientError::Closed,
                ..
            }))
        ));
    }

    #[test]
    fn a_call_refused_before_it_was_buffered_goes_to_no_queue() {
        let mut queue = DeliveryQueue::new();
        let sender = queue.sender();
        drop(sender.notify(9));
        assert_eq!(queue.pending(), 0, "uncounted at once");
        drop(sender.notify(10).armed());
        let delivered = queue.recv().unwrap();
        assert_eq!(delivered.tag, 10, "only the buffered call is heard of");
        assert_eq!(queue.pending(), 0);
        assert!(queue.try_recv().is_none());
        // Nothing was left behind in the channel either.
        sender.notify(11).armed().send(Ok(receipt(3)));
        assert_eq!(queue.recv().unwrap().tag, 11);
        assert!(queue.receiver.try_recv().is_err(), "no surplus item");
    }

    #[test]
    fn a_receiver_waiting_for_a_call_refused_on_another_thread_wakes() {
        let mut queue = DeliveryQueue::new();
        let sender = queue.sender();
        // Counted at once, as a call being handed to its producer is.
        let notify = sender.notify(1);
        let refusing = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(notify);
        });
        assert!(
            queue.recv().is_none(),
            "woken by the refusal, nothing pending"
        );
        refusing.join().unwrap();
        assert_eq!(queue.pending(), 0);
    }

    #[test]
    fn calls_sent_from_many_threads_reach_one_queue_once_each() {
        let mut queue = DeliveryQueue::new();
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let sender = queue.sender();
                std::thread::spawn(move || {
                    for call in 0..250u64 {
                        let notify = sender.notify(thread * 1000 + call);
                        if call % 10 == 0 {
                            drop(notify);
                        } else {
                            notify.armed().send(Ok(receipt(call)));
                        }
                    }
                })
            })
            .collect();
        let mut tags = Vec::new();
        while tags.len() < 900 {
            let delivered = queue.recv_timeout(Duration::from_secs(30)).unwrap();
            tags.push(delivered.tag);
        }
        for thread in threads {
            thread.join().unwrap();
        }
        assert!(queue.recv().is_none());
        assert!(queue.receiver.try_recv().is_err(), "no surplus item");
        tags.sort_unstable();
        let expected: Vec<u64> = (0..4u64)
            .flat_map(|thread| {
                (0..250u64)
                    .filter(|c| c % 10 != 0)
                    .map(move |c| thread * 1000 + c)
            })
            .collect();
        assert_eq!(tags, expected);
    }

    #[test]
    fn a_dropped_queue_or_delivery_does_not_trouble_the_sender() {
        let queue = DeliveryQueue::new();
        let sender = queue.sender();
        let notify = sender.notify(3).armed();
        let dropped_unsent = sender.notify(4).armed();
        let refused = sender.notify(5);
        drop(queue);
        notify.send(Ok(receipt(1)));
        drop(dropped_unsent);
        drop(refused);
        let (delivery, notify) = Delivery::new();
        drop(delivery);
        notify.armed().send(Ok(receipt(2)));
    }
}
