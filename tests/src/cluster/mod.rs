//! A loopback Apache Iggy 0.11.0 cluster for tests, benchmarks and the demo.
//!
//! It has two layers:
//! - a sans-IO node model: [`ClusterState`] is what every node of one cluster shares
//!   (users, sessions, streams, topics, partitions and their logs, the metadata leader and
//!   each partition's primary), and [`NodeConnection`] turns one decoded request on one
//!   connection into the one reply frame the real server would send (protocol §8, §9, §13);
//! - a tokio driver, [`TestCluster`], that runs 1 to 5 nodes on `127.0.0.1:0` and exposes
//!   the control API for scripted faults and the counters tests assert on. It serves
//!   plain TCP, or TLS with a certificate made at start (`ClusterConfig::tls`).
//!
//! The deterministic simulation drives the same model without sockets.

#[cfg(test)]
mod admin_tests;
pub mod adversary;
mod authz;
mod catalog;
mod control;
mod driver;
#[cfg(test)]
mod driver_tests;
mod groups;
#[cfg(test)]
mod groups_tests;
mod handlers_admin;
mod handlers_groups;
mod handlers_messages;
mod handlers_metadata;
mod handlers_offsets;
mod handlers_routing;
mod handlers_system;
mod handlers_users;
#[cfg(test)]
mod lag_tests;
mod log;
mod node;
mod outcome;
mod partition;
mod permissioner;
#[cfg(test)]
mod raw_client;
mod revocations;
mod sign_in_lag;
mod state;
#[cfg(test)]
mod system_tests;
mod target;
#[cfg(test)]
mod testkit;
pub mod tls;
#[cfg(test)]
mod tls_tests;
#[cfg(test)]
mod tokens_tests;
mod users;
#[cfg(test)]
mod users_tests;

pub use catalog::{Catalog, CatalogError, Lookup, MAX_PARTITIONS_PER_TOPIC, Stream, Topic};
pub use control::{PREEXISTING, SplitPrimaries};
pub use driver::TestCluster;
pub use log::{Evicted, PartitionLog, Regenerate, Retention};
pub use node::{Attachment, Binding, NodeConnection, RETIRED_CODE};
pub use outcome::Outcome;
pub use partition::{NewMessage, OffsetOwner, Partition, PendingPurge, StoredMessage};
pub use permissioner::Permissioner;
pub use revocations::{REBALANCING_TIMEOUT, REVOCATION_TICK};
pub use state::{
    ClusterConfig, ClusterState, Lag, NodeId, NodeInfo, NodeStats, PURGE_RECONCILE, SessionRecord,
};
pub use tls::{ServerCertificate, TLS_DOMAIN};
pub use users::{
    MAX_TOKENS_PER_USER, ROOT_PASSWORD, ROOT_USER_ID, ROOT_USERNAME, Token, User, Users,
};
