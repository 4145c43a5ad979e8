//! The room of a background producer's buffer, shared by its callers and its task, so that
//! a call with room is handed over without a round trip through the task.

use std::sync::{Mutex, PoisonError};

/// The buffer's room as callers see it: what is buffered plus what callers reserved and
/// handed to the task, and whether calls wait for room in the task (a caller then does not
/// take room ahead of them). One lock, taken once per call by the caller and once per
/// buffered call or submitted batch by the task.
#[derive(Debug)]
pub(crate) struct Room {
    state: Mutex<RoomState>,
    max_messages: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct RoomState {
    messages: usize,
    bytes: usize,
    waiting: usize,
}

impl Room {
    pub(crate) fn new(max_messages: usize, max_bytes: usize) -> Self {
        Self {
            state: Mutex::new(RoomState::default()),
            max_messages,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RoomState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes room for a call, if there is some and no call waits for room before it.
    pub(crate) fn reserve(&self, messages: usize, bytes: usize) -> bool {
        let mut state = self.lock();
        let fits = state.waiting == 0
            && state.messages + messages <= self.max_messages
            && state.bytes + bytes <= self.max_bytes;
        if fits {
            state.messages += messages;
            state.bytes += bytes;
        }
        fits
    }

    /// Takes room for a call the task lets in from its line (calls before it were let in
    /// first, so no order check).
    pub(crate) fn reserve_waiting(&self, messages: usize, bytes: usize) -> bool {
        let mut state = self.lock();
        let fits =
            state.messages + messages <= self.max_messages && state.bytes + bytes <= self.max_bytes;
        if fits {
            state.messages += messages;
            state.bytes += bytes;
        }
        fits
    }

    /// Gives room back: a batch left the buffer, or a call that had room was not buffered.
    pub(crate) fn release(&self, messages: usize, bytes: usize) {
        let mut state = self.lock();
        state.messages = state.messages.saturating_sub(messages);
        state.bytes = state.bytes.saturating_sub(bytes);
    }

    pub(crate) fn set_waiting(&self, waiting: usize) {
        self.lock().waiting = waiting;
    }
}
