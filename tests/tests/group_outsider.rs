//! An outsider's tests of the consumer-group promise, on both adapters, against the loopback
//! cluster without the routing commands (as the real server is). Written from the public
//! documentation only (`docs/design.md`, "Consumer groups", and the doc comments of
//! `Client::consumer`, `ConsumerBuilder`, `TopicConsumer`):
//!
//! > Every message of a topic is handed out once to a consumer group's members, in order per
//! > partition, except the batch a member was handed last in a partition whose owner changed
//! > before that batch was committed. A batch that was committed is never handed out again.
//! > No stored group offset ever decreases. A client refuses a second live consumer of the
//! > same group; a consumer dropped without `shutdown` ends its membership at once.
//! > `commit()` stores exactly what the caller was handed. Every wait is bounded; no retry
//! > storm; errors are typed.
//!
//! Every `next()` goes through [`support::Watch`], which checks each message as it is
//! handed out against the group's stored offsets read just before the call, and every
//! stored offset against what was handed out (see the module's documentation). Every
//! blocking `next_before` is timed against its deadline.

#![allow(clippy::unwrap_used)]

#[path = "group_outsider/support.rs"]
mod support;

#[path = "group_outsider/aliases.rs"]
mod aliases;
#[path = "group_outsider/churn.rs"]
mod churn;
#[path = "group_outsider/commits.rs"]
mod commits;
#[path = "group_outsider/deleted.rs"]
mod deleted;
#[path = "group_outsider/dropped.rs"]
mod dropped;
#[path = "group_outsider/growing.rs"]
mod growing;
#[path = "group_outsider/lagging.rs"]
mod lagging;
#[path = "group_outsider/moving.rs"]
mod moving;
#[path = "group_outsider/resume.rs"]
mod resume;
#[path = "group_outsider/shutdown.rs"]
mod shutdown;
#[path = "group_outsider/storm.rs"]
mod storm;
#[path = "group_outsider/strategies.rs"]
mod strategies;
#[path = "group_outsider/two_clients.rs"]
mod two_clients;
