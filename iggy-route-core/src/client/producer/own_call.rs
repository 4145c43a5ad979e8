//! Calls a producer's `on_error` makes into its own producer. The callback runs on the
//! producer's task or thread, which waits for it to return: a flush, a shutdown or a send
//! waiting for room made from inside it would wait for the very thing that waits for them.
//! The callback is called through [`OnError`], which marks the calling thread as that
//! producer's while it runs; before it waits, each adapter asks
//! [`ProducerKey::in_its_callback`], so both answer such calls alike and at once.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ErrorCallback, SendFailure};

thread_local! {
    /// The producer whose `on_error` this thread is running now, if any.
    static RUNNING: Cell<Option<ProducerKey>> = const { Cell::new(None) };
}

/// One producer among all of the process's, to tell calls from its own callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerKey(u64);

impl ProducerKey {
    /// A key no other producer of this process has.
    pub fn unique() -> Self {
        // Only ever compared for equality: a counter is enough, and reaches no output.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether the calling thread is running this producer's `on_error` now.
    pub fn in_its_callback(self) -> bool {
        RUNNING.with(|running| running.get() == Some(self))
    }
}

/// A producer's `on_error` callback, called with the thread marked as that producer's.
#[derive(Clone)]
pub struct OnError {
    callback: ErrorCallback,
    key: ProducerKey,
}

impl OnError {
    /// The callback of the producer `key` names.
    pub fn new(callback: ErrorCallback, key: ProducerKey) -> Self {
        Self { callback, key }
    }

    /// Calls it; the mark is taken off however it returns, a panic included.
    pub(super) fn call(&self, failure: SendFailure) {
        struct Unmark(Option<ProducerKey>);
        impl Drop for Unmark {
            fn drop(&mut self) {
                RUNNING.with(|running| running.set(self.0));
            }
        }
        let _unmark = Unmark(RUNNING.with(|running| running.replace(Some(self.key))));
        (self.callback)(failure);
    }
}

// By hand: the callback is not `Debug`.
impl fmt::Debug for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnError")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
