//! placeholder
#![warn(missing_docs)]

pub mod partitioning;
pub mod wire;

#[doc(hidden)]
pub mod fuzzing;
