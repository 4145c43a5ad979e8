//! Loopback Iggy test cluster, deterministic simulation, integration tests, demo and
//! benchmarks for iggy-route.

pub mod cluster;
pub mod demo;
pub mod error_events;
pub mod group_example;
pub mod nemesis;
pub mod real_cluster;
pub mod scripted;
pub mod sim;
pub mod try_cluster;
