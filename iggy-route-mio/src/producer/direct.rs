//! Direct mode: each `send` is sent from the caller's thread, chunk after chunk as the
//! core's [`DirectCall`](iggy_route_core::client::producer::DirectCall) says, and returns
//! the receipts. Nothing is buffered between calls.

use iggy_route_core::SendReceipt;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::DirectProducer;
use iggy_route_core::wire::Message;

use crate::Client;

/// The state of a direct producer (see [`Producer<Direct>`](crate::Producer)): its `send`
/// waits for every acknowledgement.
#[derive(Debug)]
pub struct DirectMode {
    pub(super) client: Client,
    pub(super) producer: DirectProducer,
}

impl DirectMode {
    pub(super) fn send(&self, messages: Vec<Message>) -> Result<Vec<SendReceipt>, ClientError> {
        let mut call = self.producer.call(messages)?;
        while let Some(chunk) = call.next_chunk() {
            let sent = self.client.send(
                chunk.stream,
                chunk.topic,
                chunk.partitioning,
                chunk.messages,
            );
            call.answered(sent)?;
        }
        Ok(call.receipts())
    }
}
