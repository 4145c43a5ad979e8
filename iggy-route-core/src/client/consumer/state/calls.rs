//! The requests a consumer's adapter makes on its behalf: offset writes, the leave, and
//! the end of a membership when the consumer goes.

use super::{Asked, ConsumerState};
use crate::client::{Call, ClientError};

impl ConsumerState {
    /// The request storing `offset` of `partition` for this consumer.
    pub fn commit_call(&self, partition: u32, offset: u64) -> Result<Call<()>, ClientError> {
        Call::store_offset(
            self.consumer(),
            self.config.stream.clone(),
            self.config.topic.clone(),
            partition,
            offset,
        )
    }

    /// The request that leaves the group, for a member that joined.
    pub fn leave_call(&self) -> Option<Call<()>> {
        let group = self.group()?.clone();
        if !self.joined {
            return None;
        }
        Call::leave_consumer_group(self.config.stream.clone(), self.config.topic.clone(), group)
            .ok()
    }

    /// The leave of [`Self::leave_call`] succeeded: the consumer is no member now.
    pub fn left(&mut self) {
        self.joined = false;
    }

    /// Whether the group may count this consumer's client as a member: it joined, or a
    /// join is out.
    fn may_be_member(&self) -> bool {
        self.joined || matches!(self.asked, Some(Asked::Join))
    }
}

impl Drop for ConsumerState {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            claim.release(self.may_be_member());
        }
    }
}
