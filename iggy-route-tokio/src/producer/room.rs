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

#[cfg(test)]
mod tests {
    use super::Room;

    #[test]
    fn room_is_taken_within_both_bounds_and_given_back() {
        let room = Room::new(10, 1_000);
        assert!(room.reserve(6, 100));
        assert!(!room.reserve(5, 100), "11 messages would exceed 10");
        assert!(room.reserve(4, 100), "exactly the bound fits");
        assert!(!room.reserve(1, 1), "full in messages");
        room.release(6, 100);
        // Held now: 4 messages, 100 bytes.
        assert!(!room.reserve(1, 901), "1,001 bytes would exceed 1,000");
        assert!(room.reserve(6, 900), "both bounds exactly reached");
    }

    #[test]
    fn callers_take_no_room_while_calls_wait_for_it() {
        let room = Room::new(10, 1_000);
        room.set_waiting(1);
        assert!(
            !room.reserve(1, 1),
            "a caller never takes room ahead of a call waiting in the task's line"
        );
        assert!(
            room.reserve_waiting(1, 1),
            "the task lets the waiting call in when there is room"
        );
        room.set_waiting(0);
        assert!(room.reserve(9, 10));
        assert!(
            !room.reserve_waiting(1, 1),
            "the line respects the bound too"
        );
    }
}
