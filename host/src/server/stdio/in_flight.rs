//! The ids of the requests handed to rmcp and not yet answered: the end of
//! the input waits on them (see [`super::Guarded`]'s `receive`).

use super::Rx;

/// The ids of the requests rmcp has and has not answered, and a wake-up
/// for the reader waiting at the end of the input.
#[derive(Default)]
pub(super) struct InFlight {
    ids: std::sync::Mutex<std::collections::HashSet<rmcp::model::RequestId>>,
    answered: tokio::sync::Notify,
}

impl InFlight {
    /// Notes a request handed to rmcp, in flight until answered.
    fn asked(&self, id: rmcp::model::RequestId) {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
    }

    /// Notes a message handed to rmcp: a request is in flight until
    /// answered; a cancelled one gets no answer (the protocol says so) and
    /// is no longer waited for.
    pub(super) fn note(&self, message: &Rx) {
        use rmcp::model::{ClientNotification, JsonRpcMessage};
        match message {
            JsonRpcMessage::Request(r) => self.asked(r.id.clone()),
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.answered(id);
                }
            }
            _ => {}
        }
    }

    /// Notes the answer to request `id`: it is no longer waited for.
    pub(super) fn answered(&self, id: &rmcp::model::RequestId) {
        if self
            .ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            self.answered.notify_waiters();
        }
    }

    /// Waits until every request handed on has been answered.
    pub(super) async fn all_answered(&self) {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            // Registered before the check: an answer in between still wakes it.
            answered.as_mut().enable();
            if self
                .ids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
            {
                return;
            }
            answered.await;
        }
    }
}
