//! The one place the core's unit tests read the clock.
//!
//! `Instant` has no constructor but `now()`, so a test needs one real instant as an
//! arbitrary origin; every other instant in a test is derived from it by adding durations,
//! and the code under test never reads the clock itself.

use std::time::Instant;

/// An arbitrary origin for a test's timeline.
#[allow(clippy::disallowed_methods)] // the one sanctioned clock read, see above
pub(crate) fn origin() -> Instant {
    Instant::now()
}
