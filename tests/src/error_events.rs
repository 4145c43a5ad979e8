//! Tests fail on any ERROR event: in this project `error!` means "the router or an adapter
//! has a bug" (expected network trouble is logged at `debug`/`warn`), so an integration test
//! installs this subscriber and asserts at its end that nothing was logged at ERROR.
//!
//! The subscriber is process-wide (the adapters log from their own tasks and threads), so
//! an ERROR from any test of the same binary fails the check of every test that runs after
//! it: the message names where it came from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

static ERRORS: AtomicU64 = AtomicU64::new(0);
static FIRST: Mutex<Option<String>> = Mutex::new(None);
static INSTALL: Once = Once::new();

/// Installs the ERROR-counting subscriber for this process (once; later calls do nothing).
pub fn install() {
    INSTALL.call_once(|| {
        // Another global subscriber may already be set by the binary; then ERROR events go
        // there and this check cannot see them, which `assert_none` cannot tell apart from
        // a clean run. Tests call `install` first, so this does not happen in this crate.
        let _ = tracing::subscriber::set_global_default(ErrorCounter);
    });
}

/// Panics if any ERROR event was logged since the process started.
pub fn assert_none() {
    let count = ERRORS.load(Ordering::SeqCst);
    let first = FIRST.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(
        count, 0,
        "{count} ERROR events were logged; the first: {first:?}"
    );
}

#[derive(Debug)]
struct ErrorCounter;

impl Subscriber for ErrorCounter {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() == Level::ERROR
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        // Spans are never enabled (only ERROR events are), so ids are never looked up.
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() != Level::ERROR {
            return;
        }
        ERRORS.fetch_add(1, Ordering::SeqCst);
        let mut text = format!("{}: ", event.metadata().target());
        event.record(&mut Text(&mut text));
        FIRST
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(text);
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

struct Text<'a>(&'a mut String);

impl Visit for Text<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_events_are_counted_and_others_are_not() {
        install();
        let before = ERRORS.load(Ordering::SeqCst);
        tracing::warn!("expected trouble is not a bug");
        assert_eq!(ERRORS.load(Ordering::SeqCst), before);
        tracing::error!(link = 3, "a bug");
        assert_eq!(ERRORS.load(Ordering::SeqCst), before + 1);
        // Undo, so that this test's deliberate error does not fail the others.
        ERRORS.fetch_sub(1, Ordering::SeqCst);
        FIRST.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}
