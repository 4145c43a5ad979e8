//! How a background call's outcome reaches its caller: a [`Delivery`] of its own, or a
//! [`DeliveryQueue`] shared by many calls, where one thread waits for whichever call
//! settles first instead of waiting for the calls one by one, in call order.

use std::sync::mpsc;
use std::time::Duration;

use iggy_route_core::SendReceipt;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::SendFailure;

/// What a call resolves to: its own receipt, or its messages back with the error.
pub(super) type Outcome = Result<SendReceipt, SendFailure>;

/// The handle of one background send call: resolves to that call's own receipt (its
/// `base_offset` is the offset of the call's first message), or to a [`SendFailure`]
/// carrying the call's messages and the error. Dropping it is fine: the outcome then goes
/// only to `on_error` or the next flush.
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
    /// The call's own receipt, or its messages back with the error.
    pub outcome: Result<SendReceipt, SendFailure>,
}

/// Where the outcomes of calls sent with
/// [`Producer::send_tagged`](super::Producer::send_tagged) go, each with the tag it was
/// sent with, in the order the calls settle. One thread waits on the queue for all its
/// calls, of one producer or of several, and learns of each as soon as it is settled:
/// a slow partition's call does not hide the calls to the others behind it.
///
/// The queue counts the calls it still expects, so a wait on it never outlasts them:
/// [`recv`](Self::recv) returns `None` at once when nothing is pending.
///
/// ```no_run
/// # fn example(producer: iggy_route_mio::Producer<iggy_route_mio::producer::Background>)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use iggy_route_mio::Message;
/// use iggy_route_mio::producer::DeliveryQueue;
///
/// let mut queue = DeliveryQueue::new();
/// for order in 0..100u64 {
///     let message = Message { payload: format!("order {order}").into(), ..Message::default() };
///     producer.send_tagged(vec![message], order, &mut queue)?;
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
    /// Cloned into each call sent to the queue. Held here too, so the channel never reads
    /// as disconnected: whether an outcome is still due is what `pending` says.
    sender: mpsc::Sender<Delivered>,
    receiver: mpsc::Receiver<Delivered>,
    /// Calls sent to this queue whose outcome was not received yet.
    pending: usize,
}

impl Default for DeliveryQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl DeliveryQueue {
    /// An empty queue.
    pub fn new() -> Self {
        let (sender, receiver) = mpsc::channel();
        Self {
            sender,
            receiver,
            pending: 0,
        }
    }

    /// Calls sent to this queue whose outcome was not received yet.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// The next settled call, waiting for it; `None` at once when no call is pending. The
    /// wait is bounded as [`Delivery::wait`] is: every call settles within the client's
    /// deadlines, and a producer that stops settles every call it holds.
    pub fn recv(&mut self) -> Option<Delivered> {
        if self.pending == 0 {
            return None;
        }
        // The queue holds a sender itself: the channel cannot disconnect.
        let delivered = self.receiver.recv().ok()?;
        self.pending -= 1;
        Some(delivered)
    }

    /// The next settled call if one is settled within `timeout`; `None` at once when no
    /// call is pending.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Delivered> {
        if self.pending == 0 {
            return None;
        }
        let delivered = self.receiver.recv_timeout(timeout).ok()?;
        self.pending -= 1;
        Some(delivered)
    }

    /// The next settled call if one is settled now.
    pub fn try_recv(&mut self) -> Option<Delivered> {
        if self.pending == 0 {
            return None;
        }
        let delivered = self.receiver.try_recv().ok()?;
        self.pending -= 1;
        Some(delivered)
    }

    /// Where a call sent to this queue with `tag` reports; counted as pending only once
    /// the call is buffered ([`counted`](Self::counted)).
    pub(super) fn notify(&self, tag: u64) -> Notify {
        Notify::new(Target::Queue {
            tag,
            sender: self.sender.clone(),
        })
    }

    /// A call sent to this queue was buffered: its outcome will come.
    pub(super) fn counted(&mut self) {
        self.pending += 1;
    }
}

/// Where a settled call's outcome goes. Once [`armed`](Self::armed) (its call buffered),
/// it is never lost silently: dropped without an outcome, on any path (a producer thread
/// that stops, a panic between taking it and handing the outcome on), it tells its
/// caller the call stopped. A [`Delivery`] would read its dropped sender so, but a shared
/// queue cannot tell one call's sender from another's, and would wait for it.
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
        sender: mpsc::Sender<Delivered>,
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
            Self::Queue { tag, sender } => {
                let _ = sender.send(Delivered { tag, outcome });
            }
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
    /// refused at the door goes to no queue (its sender got the error).
    pub(super) fn armed(mut self) -> Self {
        self.armed = true;
        self
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
        if self.armed
            && let Some(target) = self.target.take()
        {
            target.send(stopped());
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
        }
    }

    #[test]
    fn an_empty_queue_answers_at_once_without_waiting() {
        let mut queue = DeliveryQueue::new();
        assert!(queue.recv().is_none());
        assert!(queue.recv_timeout(Duration::from_secs(3600)).is_none());
        assert!(queue.try_recv().is_none());
        assert_eq!(queue.pending(), 0);
    }

    #[test]
    fn outcomes_come_in_the_order_they_settle_with_their_tags() {
        let mut queue = DeliveryQueue::new();
        let first = queue.notify(7).armed();
        queue.counted();
        let second = queue.notify(8).armed();
        queue.counted();
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
        let _notify = queue.notify(1);
        queue.counted();
        assert!(queue.recv_timeout(Duration::from_millis(10)).is_none());
        assert_eq!(queue.pending(), 1, "still expected");
    }

    #[test]
    fn a_delivery_whose_producer_stopped_reads_closed() {
        let (mut delivery, notify) = Delivery::new();
        assert!(delivery.try_wait().is_none());
        drop(notify);
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
        drop(queue.notify(9));
        let armed = queue.notify(10).armed();
        queue.counted();
        drop(armed);
        let delivered = queue.recv().unwrap();
        assert_eq!(delivered.tag, 10, "only the buffered call is heard of");
        assert!(queue.try_recv().is_none());
    }

    #[test]
    fn a_dropped_queue_or_delivery_does_not_trouble_the_sender() {
        let queue = DeliveryQueue::new();
        let notify = queue.notify(3).armed();
        let dropped_unsent = queue.notify(4).armed();
        drop(queue);
        notify.send(Ok(receipt(1)));
        drop(dropped_unsent);
        let (delivery, notify) = Delivery::new();
        drop(delivery);
        notify.armed().send(Ok(receipt(2)));
    }
}
