//! How a background producer's state speaks to the adapter: the handles it tells things
//! through ([`Handles`]) and what it asks the adapter to carry out ([`Output`]).

use std::fmt;

use super::{Batch, OnError, ProducerError, SendFailure};
use crate::client::ClientError;
use crate::request::SendReceipt;

/// The adapter's handles the producer tells things through, and how each is told (never
/// blocking: a caller that stopped listening is not an error).
pub trait Handles {
    /// A caller waiting for room: told `Ok(())` once its call is buffered, or why not.
    type Waiter;
    /// Where a buffered call's outcome goes.
    type Delivery;
    /// A caller waiting for a flush (or a shutdown) to be over.
    type Flush;

    /// Tells a waiting caller whether its call was buffered.
    fn admit(waiter: Self::Waiter, outcome: Result<(), ClientError>);
    /// Hands a buffered call's outcome to its delivery.
    fn deliver(delivery: Self::Delivery, outcome: Result<SendReceipt, SendFailure>);
    /// A delivery whose call was never buffered, handed back unused.
    fn unused(delivery: Self::Delivery) {
        drop(delivery);
    }
    /// Tells a flush's caller its report.
    fn flush_over(done: Self::Flush, report: Result<(), ProducerError>);
}

/// What the adapter carries out, in this order.
pub enum Output<H: Handles> {
    /// Hand this batch to the client, after the batches before it.
    Submit(Batch),
    /// A waiting call is buffered: tell its caller.
    Admitted(H::Waiter),
    /// A waiting call was not buffered (no room by its deadline, or the producer shut
    /// down): tell its caller `error`; its delivery is handed back unused.
    Refused {
        /// The waiting caller.
        waiter: H::Waiter,
        /// Its delivery, never told anything.
        delivery: H::Delivery,
        /// Why.
        error: ClientError,
    },
    /// A buffered call settled: hand `outcome` to `delivery` first, then `on_error` (when
    /// set) to the producer's error callback.
    Settled {
        /// The call's delivery.
        delivery: H::Delivery,
        /// Its own receipt, or its messages back with the error.
        outcome: Result<SendReceipt, SendFailure>,
        /// The failure again, for the callback: set only when the producer has one.
        on_error: Option<SendFailure>,
    },
    /// A flush or shutdown is over: tell its caller.
    FlushOver(H::Flush, Result<(), ProducerError>),
}

impl<H: Handles> Output<H> {
    /// Tells whoever this output is for, in the one order both adapters keep: a settled
    /// call's delivery first, then its failure to `on_error` (on the adapter's task or
    /// thread, which submits nothing meanwhile). A batch is handed back for the adapter
    /// to submit.
    pub fn tell(self, on_error: Option<&OnError>) -> Option<Batch> {
        match self {
            Self::Submit(batch) => return Some(batch),
            Self::Admitted(waiter) => H::admit(waiter, Ok(())),
            Self::Refused {
                waiter,
                delivery,
                error,
            } => {
                H::unused(delivery);
                H::admit(waiter, Err(error));
            }
            Self::Settled {
                delivery,
                outcome,
                on_error: failure,
            } => {
                if let Err(failure) = &outcome {
                    let messages = failure.messages.len();
                    tracing::warn!(messages, error = %failure.error, "producer send failed");
                }
                H::deliver(delivery, outcome);
                if let (Some(callback), Some(failure)) = (on_error, failure) {
                    callback.call(failure);
                }
            }
            Self::FlushOver(done, report) => H::flush_over(done, report),
        }
        None
    }

    /// What is still to tell of an output taken but not carried out before the producer
    /// ended: a batch never handed over goes nowhere (the end fails its calls `Closed`);
    /// a settled call keeps its outcome but skips the callback; a flush hears `Stopped`
    /// after an abnormal end, whatever its report was.
    pub(super) fn after_end(self, abnormally: bool) -> Option<Self> {
        Some(match self {
            Self::Submit(_) => return None,
            Self::Settled {
                delivery, outcome, ..
            } => Self::Settled {
                delivery,
                outcome,
                on_error: None,
            },
            Self::FlushOver(done, report) => Self::FlushOver(
                done,
                if abnormally {
                    Err(ProducerError::Stopped)
                } else {
                    report
                },
            ),
            told @ (Self::Admitted(_) | Self::Refused { .. }) => told,
        })
    }
}

// By hand: the handles need not be `Debug`.
impl<H: Handles> fmt::Debug for Output<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Submit(batch) => f.debug_tuple("Submit").field(&batch.id).finish(),
            Self::Admitted(_) => f.write_str("Admitted"),
            Self::Refused { error, .. } => f.debug_tuple("Refused").field(error).finish(),
            Self::Settled { outcome, .. } => f.debug_tuple("Settled").field(outcome).finish(),
            Self::FlushOver(_, outcome) => f.debug_tuple("FlushOver").field(outcome).finish(),
        }
    }
}
